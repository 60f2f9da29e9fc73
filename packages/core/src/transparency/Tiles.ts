/**
 * A session's tree as C2SP `tlog-tiles` (docs/DESIGN.md §14): static files anyone can
 * host and anyone can check with the signer's public key. Pure: coordinates and paths
 * of tiles and entry bundles, the hashes a tile holds, the bytes of a bundle, and a
 * `Builder` that turns leaf hashes, fed once in order, into the tiles of the tree.
 *
 * A tile at level `L` holds up to 256 consecutive hashes of the tree at height `8L`:
 * level 0 the leaf hashes, level `L + 1` the roots of the full tiles of level `L`. The
 * rightmost tile of each level is partial for most sizes (`.p/<W>`, `W` hashes); it is
 * replaced by the full tile once 256 are there, and a full tile never changes. The
 * builder holds one partial tile per level (`O(log n)` of 8 KiB at most) and can resume
 * from the partial tiles of a published size, so publishing more costs only the new
 * leaves.
 *
 * Entry bundles hold, per leaf, the entry's preimage: the bytes its `entry_hash` is the
 * SHA-256 of (§2). The tree's leaf is that hash, so a bundle entry reaches the tile
 * through one SHA-256 more than a generic log's (`leafHash(SHA-256(bytes))`), and it
 * gives back the whole entry, so a reader can check the chain's links too. An entry
 * that is only its 32-byte hash (the hashes-only mode for private journals, or an
 * entry whose preimage does not fit the bundle's 16-bit length) is the leaf itself, as
 * in a generic log: it proves the entry's place in the tree and in the chain, and
 * nothing of its content.
 *
 * @since 0.1.0
 */
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { decode as decodeEntry, type Entry, isTool } from "../Entry.ts"
import { canonicalize } from "../internal/jcs.ts"
import { otherPreimage, toolPreimage } from "../internal/preimage.ts"
import * as PreimageRead from "../internal/preimageRead.ts"
import * as Merkle from "../Merkle.ts"
import * as Sha256 from "../Sha256.ts"

/**
 * Hashes in a full tile (C2SP `tlog-tiles`: tiles of height 8).
 *
 * @since 0.1.0
 */
export const TILE_WIDTH = 256

/**
 * Bytes of a full tile: 256 hashes of 32 bytes.
 *
 * @since 0.1.0
 */
export const FULL_TILE_BYTES = TILE_WIDTH * Merkle.HASH_BYTES

/**
 * The longest entry a bundle can hold: its length prefix is a big-endian `u16`.
 *
 * @since 0.1.0
 */
export const MAX_BUNDLE_ENTRY = 0xffff

/**
 * The most bytes a bundle of 256 entries can take.
 *
 * @since 0.1.0
 */
export const MAX_BUNDLE_BYTES = TILE_WIDTH * (2 + MAX_BUNDLE_ENTRY)

/**
 * A tile: its level, its index within the level, and how many hashes it holds (256
 * when full).
 *
 * @since 0.1.0
 */
export interface Tile {
  readonly level: number
  readonly index: number
  readonly width: number
}

/**
 * A tile and its hashes (`width` × 32 bytes).
 *
 * @since 0.1.0
 */
export interface TileData {
  readonly tile: Tile
  readonly hashes: Uint8Array
}

/**
 * The path element of a tile index: zero-padded groups of three digits, all but the
 * last prefixed with `x` (`1234067` is `x001/x234/067`).
 *
 * @since 0.1.0
 */
export const indexPath = (index: number): string => {
  let rest = index
  const groups = [String(rest % 1000).padStart(3, "0")]
  rest = Math.floor(rest / 1000)
  while (rest > 0) {
    groups.unshift(`x${String(rest % 1000).padStart(3, "0")}`)
    rest = Math.floor(rest / 1000)
  }
  return groups.join("/")
}

const widthSuffix = (width: number): string => width === TILE_WIDTH ? "" : `.p/${width}`

/**
 * Where a tile is served: `tile/<L>/<N>[.p/<W>]`.
 *
 * @since 0.1.0
 */
export const tilePath = (tile: Tile): string => `tile/${tile.level}/${indexPath(tile.index)}${widthSuffix(tile.width)}`

/**
 * Where the entry bundle of level-0 tile `index` is served: `tile/entries/<N>[.p/<W>]`.
 *
 * @since 0.1.0
 */
export const bundlePath = (index: number, width: number): string =>
  `tile/entries/${indexPath(index)}${widthSuffix(width)}`

/**
 * The partial tiles of a tree of `size` leaves, lowest level first: at level `L` the
 * tile `floor(size / 256^(L+1))` of width `floor(size / 256^L) mod 256`, for every
 * level below the tree's top (a width of 0 means the level has no partial tile).
 *
 * @since 0.1.0
 */
export const partialTiles = (size: number): ReadonlyArray<Tile> => {
  const out: Array<Tile> = []
  for (let below = size; below > 0; below = Math.floor(below / TILE_WIDTH)) {
    out.push({ level: out.length, index: Math.floor(below / TILE_WIDTH), width: below % TILE_WIDTH })
  }
  return out
}

/**
 * The number of entry bundles of a tree of `size` leaves (the last one partial unless
 * `size` is a multiple of 256).
 *
 * @since 0.1.0
 */
export const bundleCount = (size: number): number => Math.ceil(size / TILE_WIDTH)

/**
 * The width of entry bundle `index` in a tree of `size` leaves.
 *
 * @since 0.1.0
 */
export const bundleWidth = (index: number, size: number): number => Math.min(TILE_WIDTH, size - index * TILE_WIDTH)

// ---------------------------------------------------------------------------
// Building tiles

/**
 * The root of a full tile: its 256 hashes as the leaves of a perfect tree of height 8
 * (the hash the tile stands for in the level above).
 *
 * @since 0.1.0
 */
export const fullRoot = (hashes: Uint8Array): Uint8Array => {
  let level: Array<Uint8Array> = []
  for (let i = 0; i < TILE_WIDTH; i++) {
    level.push(hashes.subarray(i * Merkle.HASH_BYTES, (i + 1) * Merkle.HASH_BYTES))
  }
  while (level.length > 1) {
    const next: Array<Uint8Array> = []
    for (let i = 0; i < level.length; i += 2) next.push(Merkle.nodeHash(level[i]!, level[i + 1]!))
    level = next
  }
  return level[0]!
}

/**
 * The tiles of a tree built from its leaf hashes, fed once in order. `full` drains the
 * full tiles completed since its last call (each emitted once, lowest level first as
 * they complete); `partials` and `range` describe the tree as it is now. One owner.
 *
 * @since 0.1.0
 */
export interface Builder {
  readonly size: () => number
  /** Appends a leaf by its leaf hash (`Merkle.leafHash`). */
  readonly push: (leafHash: Uint8Array) => void
  readonly full: () => ReadonlyArray<TileData>
  /** The partial tiles of the current size with at least one hash, lowest level first. */
  readonly partials: () => ReadonlyArray<TileData>
  /** The current tree's compact range. */
  readonly range: () => Merkle.CompactRange
}

interface Level {
  readonly hashes: Uint8Array
  count: number
  index: number
}

/**
 * A builder for the tree of `size` leaves whose partial tiles (lowest level first,
 * one per entry of `partialTiles(size)`, each `width × 32` bytes; empty for a width of
 * 0) are `partials`: the empty tree when nothing is given. Throws a `TypeError` when a
 * partial does not have its width: the caller reads and checks them first.
 *
 * @since 0.1.0
 */
export const builder = (size = 0, partials: ReadonlyArray<Uint8Array> = []): Builder => {
  const shape = partialTiles(size)
  if (partials.length !== shape.length) {
    throw new TypeError(`a tree of ${size} has ${shape.length} levels, not ${partials.length}`)
  }
  const levels: Array<Level> = shape.map((tile, l) => {
    const given = partials[l]!
    if (given.length !== tile.width * Merkle.HASH_BYTES) {
      throw new TypeError(`the partial tile of level ${l} holds ${given.length} bytes, not ${tile.width} hashes`)
    }
    const hashes = new Uint8Array(FULL_TILE_BYTES)
    hashes.set(given)
    return { hashes, count: tile.width, index: tile.index }
  })
  let leaves = size
  let done: Array<TileData> = []
  const pushAt = (l: number, hash: Uint8Array): void => {
    const level = levels[l] ??= { hashes: new Uint8Array(FULL_TILE_BYTES), count: 0, index: 0 }
    level.hashes.set(hash, level.count * Merkle.HASH_BYTES)
    level.count++
    if (level.count < TILE_WIDTH) return
    const hashes = level.hashes.slice()
    done.push({ tile: { level: l, index: level.index, width: TILE_WIDTH }, hashes })
    level.count = 0
    level.index++
    pushAt(l + 1, fullRoot(hashes))
  }
  const partialsNow = (): Array<TileData> =>
    levels.flatMap((level, l) =>
      level.count === 0 ? [] : [{
        tile: { level: l, index: level.index, width: level.count },
        hashes: level.hashes.slice(0, level.count * Merkle.HASH_BYTES)
      }]
    )
  return {
    size: () => leaves,
    push: (hash) => {
      if (hash.length !== Merkle.HASH_BYTES) throw new TypeError(`a leaf hash is ${Merkle.HASH_BYTES} bytes`)
      leaves++
      pushAt(0, hash)
    },
    full: () => {
      const out = done
      done = []
      return out
    },
    partials: partialsNow,
    range: () => rangeOf(partialsNow())
  }
}

/**
 * The compact range of a tree from its partial tiles (lowest level first, as
 * `Builder.partials` gives them): each tile's hashes are roots of equal perfect
 * subtrees, so the tiles from the top level down, each as a small tree of its hashes,
 * are the tree's decomposition.
 *
 * @since 0.1.0
 */
export const rangeOf = (partials: ReadonlyArray<TileData>): Merkle.CompactRange => {
  const nodes: Array<Uint8Array> = []
  let size = 0
  for (let i = partials.length - 1; i >= 0; i--) {
    const { hashes, tile } = partials[i]!
    const b = Merkle.builder()
    for (let h = 0; h < tile.width; h++) {
      b.appendLeafHash(hashes.subarray(h * Merkle.HASH_BYTES, (h + 1) * Merkle.HASH_BYTES))
    }
    nodes.push(...b.range().nodes)
    size += tile.width * TILE_WIDTH ** tile.level
  }
  return { size, nodes }
}

// ---------------------------------------------------------------------------
// Entry bundles

/**
 * What a bundle entry holds: `entries` (the preimage, whole) or `hashes` (the 32-byte
 * `entry_hash` alone).
 *
 * @since 0.1.0
 */
export type Content = "entries" | "hashes"

/**
 * The preimage of an entry: the bytes its `entry_hash` is the SHA-256 of (§2).
 *
 * @since 0.1.0
 */
export const preimage = (entry: Entry): Uint8Array =>
  isTool(entry)
    ? toolPreimage(entry)
    : otherPreimage(entry.sequence, entry.prev_hash, entry.timestamp_secs, entry.kind, canonicalize(entry.payload))

/**
 * The bytes of `entry` in a bundle: its preimage with `entries`, unless longer than
 * `MAX_BUNDLE_ENTRY`; its 32-byte hash with `hashes` or then.
 *
 * @since 0.1.0
 */
export const bundleEntry = (entry: Entry, content: Content): Uint8Array => {
  if (content === "entries") {
    const bytes = preimage(entry)
    if (bytes.length <= MAX_BUNDLE_ENTRY) return bytes
  }
  return hexToBytes(entry.entry_hash)
}

/**
 * A bundle: each entry as a big-endian `u16` length and its bytes. Throws a
 * `TypeError` for an entry longer than `MAX_BUNDLE_ENTRY`.
 *
 * @since 0.1.0
 */
export const encodeBundle = (entries: ReadonlyArray<Uint8Array>): Uint8Array => {
  let total = 0
  for (const e of entries) {
    if (e.length > MAX_BUNDLE_ENTRY) throw new TypeError(`a bundle entry of ${e.length} bytes`)
    total += 2 + e.length
  }
  const out = new Uint8Array(total)
  let at = 0
  for (const e of entries) {
    out[at] = e.length >> 8
    out[at + 1] = e.length & 0xff
    out.set(e, at + 2)
    at += 2 + e.length
  }
  return out
}

/**
 * Why published tiles, bundles or checkpoints were refused: `checkpoint` (not a
 * signed checkpoint of the keys given, or of another origin), `tile` (a tile that is
 * missing, of the wrong length or with other hashes than the leaves give), `bundle` (a
 * bundle missing, truncated, with trailing bytes, or an entry that is neither a
 * preimage nor a hash), `chain` (entries that do not form a valid chain), `root` (the
 * leaves do not give the checkpoint's root), `since` (the tree does not extend an
 * earlier checkpoint: a fork or a rollback).
 *
 * @since 0.1.0
 */
export class TilesRefused extends Schema.TaggedError<TilesRefused>()("TilesRefused", {
  reason: Schema.Literals(["checkpoint", "tile", "bundle", "chain", "root", "since"]),
  path: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `the published log is refused (${this.reason}) at ${this.path}: ${this.detail}`
  }
}

/**
 * The entries of a bundle of `width` entries read at `path`: exactly `width`
 * length-prefixed entries, no byte left over.
 *
 * @since 0.1.0
 */
export const decodeBundle = (
  bytes: Uint8Array,
  width: number,
  path: string
): Result.Result<ReadonlyArray<Uint8Array>, TilesRefused> => {
  const out: Array<Uint8Array> = []
  let at = 0
  while (out.length < width) {
    if (at + 2 > bytes.length) break
    const n = (bytes[at]! << 8) | bytes[at + 1]!
    if (at + 2 + n > bytes.length) break
    out.push(bytes.subarray(at + 2, at + 2 + n))
    at += 2 + n
  }
  if (out.length < width) {
    return Result.fail(
      new TilesRefused({ reason: "bundle", path, detail: `it ends after ${out.length} of its ${width} entries` })
    )
  }
  if (at !== bytes.length) {
    return Result.fail(
      new TilesRefused({ reason: "bundle", path, detail: `${bytes.length - at} bytes follow its ${width} entries` })
    )
  }
  return Result.succeed(out)
}

/**
 * A bundle entry read back: its `entry_hash` and, unless the entry is a hash alone,
 * the entry (its fields decoded from the preimage and checked as `Entry.decode` does).
 *
 * @since 0.1.0
 */
export interface Read {
  readonly entryHash: string
  readonly entry: Entry | undefined
}

/**
 * Reads a bundle entry: 32 bytes are an `entry_hash`; anything else must be a whole
 * preimage whose fields make an entry that encodes back to the same bytes (so a
 * payload text other than the canonical one is refused), its hash the SHA-256 of the
 * bytes. The entry therefore recomputes to its `entry_hash`, as `Chain.verify` would
 * check; its link is the caller's to check.
 *
 * @since 0.1.0
 */
export const readEntry = (bytes: Uint8Array, path: string, index: number): Result.Result<Read, TilesRefused> => {
  if (bytes.length === Merkle.HASH_BYTES) return Result.succeed({ entryHash: bytesToHex(bytes), entry: undefined })
  const fields = PreimageRead.read(bytes)
  const entryHash = Sha256.hex(bytes)
  const decoded = fields === undefined ? undefined : decodeEntry({ ...fields, entry_hash: entryHash })
  if (decoded !== undefined && Result.isSuccess(decoded) && !Merkle.equals(preimage(decoded.success), bytes)) {
    return Result.fail(
      new TilesRefused({ reason: "bundle", path, detail: `entry ${index} is not the canonical preimage of its entry` })
    )
  }
  if (decoded === undefined || Result.isFailure(decoded)) {
    return Result.fail(
      new TilesRefused({
        reason: "bundle",
        path,
        detail: `entry ${index} (${bytes.length} bytes) is neither a hash nor the preimage of an entry${
          decoded !== undefined && Result.isFailure(decoded) ? `: ${decoded.failure.message.split("\n")[0]}` : ""
        }`
      })
    )
  }
  return Result.succeed({ entryHash, entry: decoded.success })
}

// ---------------------------------------------------------------------------
// Writing

/**
 * One file of a published log: its path under the prefix and its bytes. A `full`
 * file (a full tile or bundle) never changes once written; a partial one is written
 * beside the others of its index, under its width.
 *
 * @since 0.1.0
 */
export interface File {
  readonly path: string
  readonly bytes: Uint8Array
  readonly full: boolean
}

/**
 * Turns entries, fed in sequence order, into the files of the log: `push` one entry,
 * `full` drains the full tiles and bundles completed since its last call (the caller
 * drains often, so memory stays one bundle and one tile per level), `partials` gives
 * the partial tiles and bundle of the current size. One owner.
 *
 * @since 0.1.0
 */
export interface Writer {
  readonly size: () => number
  readonly push: (entry: Entry) => void
  readonly full: () => ReadonlyArray<File>
  readonly partials: () => ReadonlyArray<File>
  readonly range: () => Merkle.CompactRange
}

/**
 * A writer continuing the log of `size` entries whose partial tiles are `partials`
 * (as for `builder`) and whose partial bundle holds `pending` (its entries' bytes;
 * `size mod 256` of them). Throws a `TypeError` when they do not fit `size`.
 *
 * @since 0.1.0
 */
export const writer = (
  content: Content,
  size = 0,
  partials: ReadonlyArray<Uint8Array> = [],
  pending: ReadonlyArray<Uint8Array> = []
): Writer => {
  if (pending.length !== size % TILE_WIDTH) {
    throw new TypeError(
      `the partial bundle of a tree of ${size} has ${size % TILE_WIDTH} entries, not ${pending.length}`
    )
  }
  const tiles = builder(size, partials)
  let bundle: Array<Uint8Array> = pending.slice()
  let done: Array<File> = []
  return {
    size: tiles.size,
    push: (entry) => {
      bundle.push(bundleEntry(entry, content))
      tiles.push(Merkle.entryLeafHash(entry.entry_hash))
      if (bundle.length === TILE_WIDTH) {
        const index = Math.floor((tiles.size() - 1) / TILE_WIDTH)
        done.push({ path: bundlePath(index, TILE_WIDTH), bytes: encodeBundle(bundle), full: true })
        bundle = []
      }
    },
    full: () => {
      const out = done
      done = []
      for (const t of tiles.full()) out.push({ path: tilePath(t.tile), bytes: t.hashes, full: true })
      return out
    },
    partials: () => {
      const out: Array<File> = []
      if (bundle.length > 0) {
        const index = Math.floor(tiles.size() / TILE_WIDTH)
        out.push({ path: bundlePath(index, bundle.length), bytes: encodeBundle(bundle), full: false })
      }
      for (const t of tiles.partials()) out.push({ path: tilePath(t.tile), bytes: t.hashes, full: false })
      return out
    },
    range: tiles.range
  }
}
