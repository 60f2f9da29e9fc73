/**
 * Checking a session published as C2SP `tlog-tiles` (docs/DESIGN.md §14) from the files
 * alone, with the signer's public key: no journal, no storage. `verify` reads the
 * `checkpoint`, every entry bundle and every tile through a `Read` the caller gives (a
 * directory, HTTP), and refuses with a `TilesRefused` naming the file and the reason.
 *
 * What it establishes: the checkpoint is signed by one of the keys as the log of
 * `<key name>/<session id>`; the bundles' entries, hashed, give the checkpoint's root
 * (so every published tile is the tree's, and every one is compared with the tile the
 * leaves give); the entries form a valid chain from `ZERO_HASH` (sequence, link, hash,
 * as `Chain.verify`), except that an entry published as its hash alone shows neither
 * its own link nor its content, only its place; and with an earlier checkpoint, that
 * the tree extends it (a consistency proof from the leaves, verified as a third party
 * would). One pass, `O(n)` hashing; memory one bundle (at most `Tiles.MAX_BUNDLE_BYTES`)
 * and one tile per level.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { isSessionId, ZERO_HASH } from "../Entry.ts"
import { decodeUtf8 } from "../internal/preimageRead.ts"
import * as Merkle from "../Merkle.ts"
import * as SignedNote from "./SignedNote.ts"
import * as Tiles from "./Tiles.ts"
import * as TreeHead from "./TreeHead.ts"

/**
 * Reads one published file by its path under the log's prefix (`checkpoint`,
 * `tile/0/000`, …): its bytes, or `undefined` when there is no such file. A file
 * longer than `maxBytes` is the reader's failure.
 *
 * @since 0.1.0
 */
export type Read<E> = (path: string, maxBytes: number) => Effect.Effect<Uint8Array | undefined, E>

/**
 * What a verification established.
 *
 * @since 0.1.0
 */
export interface Verified {
  readonly origin: string
  readonly id: string
  readonly size: number
  readonly root: Uint8Array
  readonly signedBy: ReadonlyArray<string>
  readonly cosignedBy: ReadonlyArray<{ readonly name: string; readonly timestamp: number }>
  /** Entries published as their hash alone: their content and own link are not shown. */
  readonly hashesOnly: number
  /** The earlier checkpoint's size the tree was proven to extend. */
  readonly since: number | undefined
}

const refused = (reason: Tiles.TilesRefused["reason"], path: string, detail: string) =>
  new Tiles.TilesRefused({ reason, path, detail })

interface Head {
  readonly head: TreeHead.TreeHead
  readonly id: string
  readonly opened: SignedNote.Opened
}

/**
 * Opens a checkpoint note with `verifiers`: a signature of type Ed25519 by one of them
 * must verify, and the origin must be `<that key's name>/<session id>`.
 *
 * @since 0.1.0
 */
export const openCheckpoint = (
  note: string,
  verifiers: ReadonlyArray<SignedNote.Verifier>,
  path: string
): Result.Result<Head, Tiles.TilesRefused> => {
  const opened = SignedNote.open(note, verifiers)
  if (Result.isFailure(opened)) return Result.fail(refused("checkpoint", path, opened.failure.message))
  const parsed = TreeHead.parse(opened.success.text)
  if (Result.isFailure(parsed)) return Result.fail(refused("checkpoint", path, parsed.failure.message))
  const head = parsed.success
  const signers = opened.success.verified.filter((v) => v.verifier.type === SignedNote.ED25519)
  if (signers.length === 0) {
    return Result.fail(refused("checkpoint", path, "no key given signed it as its log (only cosignatures verified)"))
  }
  for (const s of signers) {
    const prefix = `${s.verifier.name}/`
    const id = head.origin.slice(prefix.length)
    if (head.origin.startsWith(prefix) && isSessionId(id)) return Result.succeed({ head, id, opened: opened.success })
  }
  return Result.fail(
    refused(
      "checkpoint",
      path,
      `its origin ${JSON.stringify(head.origin)} is not a session of ${signers.map((s) => s.verifier.name).join(", ")}`
    )
  )
}

const readNote = <E>(read: Read<E>, path: string) =>
  Effect.flatMap(read(path, SignedNote.MAX_NOTE_BYTES), (bytes) => {
    if (bytes === undefined) return Effect.fail(refused("checkpoint", path, "there is no checkpoint"))
    const text = decodeUtf8(bytes)
    return text === undefined ? Effect.fail(refused("checkpoint", path, "it is not UTF-8")) : Effect.succeed(text)
  })

// A partial tile or bundle, or, once it was replaced, the prefix of the full one.
const readWithFallback = <E>(
  read: Read<E>,
  path: string,
  fullPath: string,
  width: number,
  maxBytes: number
): Effect.Effect<{ readonly bytes: Uint8Array; readonly path: string; readonly full: boolean } | undefined, E> =>
  Effect.flatMap(read(path, maxBytes), (bytes) => {
    if (bytes !== undefined || width === Tiles.TILE_WIDTH) {
      return Effect.succeed(bytes === undefined ? undefined : { bytes, path, full: width === Tiles.TILE_WIDTH })
    }
    return Effect.map(
      read(fullPath, maxBytes),
      (full) => full === undefined ? undefined : { bytes: full, path: fullPath, full: true }
    )
  })

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && Merkle.equals(a, b)

/**
 * Verifies a published log (see the module header). `since` is an earlier checkpoint
 * note of the same log, checked with the same keys.
 *
 * @since 0.1.0
 */
export const verify = <E>(
  read: Read<E>,
  options: { readonly verifiers: ReadonlyArray<SignedNote.Verifier>; readonly since?: string | undefined }
): Effect.Effect<Verified, Tiles.TilesRefused | E> =>
  Effect.gen(function*() {
    const note = yield* readNote(read, "checkpoint")
    const { head, id, opened } = yield* Effect.fromResult(openCheckpoint(note, options.verifiers, "checkpoint"))
    let earlier: TreeHead.TreeHead | undefined
    if (options.since !== undefined) {
      const old = yield* Effect.fromResult(openCheckpoint(options.since, options.verifiers, "--since"))
      earlier = old.head
      if (earlier.origin !== head.origin) {
        return yield* refused(
          "since",
          "checkpoint",
          `its origin ${head.origin} is not the earlier checkpoint's ${earlier.origin}`
        )
      }
      if (earlier.size > head.size) {
        return yield* refused(
          "since",
          "checkpoint",
          `it covers ${head.size} entries, the earlier checkpoint ${earlier.size}: the log was cut or forked`
        )
      }
    }
    const spans = earlier === undefined ? [] : Merkle.consistencySpans(earlier.size, head.size)!
    const proof = Merkle.collector(spans)
    const tiles = Tiles.builder()
    let prev = ZERO_HASH
    let hashesOnly = 0
    let oldRoot: Uint8Array | undefined = earlier?.size === 0 ? Merkle.emptyRoot() : undefined

    const checkTile = (data: Tiles.TileData) =>
      Effect.gen(function*() {
        const path = Tiles.tilePath(data.tile)
        const fullPath = Tiles.tilePath({ ...data.tile, width: Tiles.TILE_WIDTH })
        const got = yield* readWithFallback(read, path, fullPath, data.tile.width, Tiles.FULL_TILE_BYTES)
        if (got === undefined) return yield* refused("tile", path, "there is no such tile")
        const bytes = got.full && data.tile.width < Tiles.TILE_WIDTH
          ? got.bytes.subarray(0, data.hashes.length)
          : got.bytes
        if (got.full && got.bytes.length !== Tiles.FULL_TILE_BYTES) {
          return yield* refused("tile", got.path, `it holds ${got.bytes.length} bytes, a full tile 8192`)
        }
        if (!sameBytes(bytes, data.hashes)) {
          return yield* refused("tile", got.path, "its hashes are not those the entries give")
        }
      })

    for (let b = 0; b < Tiles.bundleCount(head.size); b++) {
      const width = Tiles.bundleWidth(b, head.size)
      const path = Tiles.bundlePath(b, width)
      const got = yield* readWithFallback(
        read,
        path,
        Tiles.bundlePath(b, Tiles.TILE_WIDTH),
        width,
        Tiles.MAX_BUNDLE_BYTES
      )
      if (got === undefined) return yield* refused("bundle", path, "there is no such bundle")
      // A full bundle standing in for a replaced partial one: only its first entries count.
      const entries = yield* Effect.fromResult(
        got.full && width < Tiles.TILE_WIDTH
          ? Result.map(Tiles.decodeBundle(got.bytes, Tiles.TILE_WIDTH, got.path), (all) => all.slice(0, width))
          : Tiles.decodeBundle(got.bytes, width, got.path)
      )
      for (let i = 0; i < entries.length; i++) {
        const index = b * Tiles.TILE_WIDTH + i
        const r = yield* Effect.fromResult(Tiles.readEntry(entries[i]!, got.path, index))
        if (r.entry === undefined) hashesOnly++
        else {
          if (r.entry.sequence !== index) {
            return yield* refused("chain", got.path, `entry ${index} has sequence ${r.entry.sequence}`)
          }
          // Its hash is the SHA-256 of its canonical preimage (`readEntry`): the link is what is left to check.
          if (r.entry.prev_hash !== prev) {
            return yield* refused(
              "chain",
              got.path,
              `entry ${index} links to ${r.entry.prev_hash}, the entry before it is ${prev}`
            )
          }
        }
        prev = r.entryHash
        const leaf = Merkle.entryLeafHash(r.entryHash)
        tiles.push(leaf)
        proof.pushLeafHash(leaf)
        if (earlier !== undefined && tiles.size() === earlier.size) oldRoot = Merkle.root(tiles.range())
      }
      for (const full of tiles.full()) yield* checkTile(full)
    }
    for (const partial of tiles.partials()) yield* checkTile(partial)
    const root = Merkle.root(tiles.range())
    if (!Merkle.equals(root, head.root)) {
      return yield* refused("root", "checkpoint", `the entries give the root ${TreeHead.base64(root)}, not its own`)
    }
    if (earlier !== undefined) {
      if (!Merkle.equals(oldRoot!, earlier.root)) {
        return yield* refused(
          "since",
          "checkpoint",
          `its first ${earlier.size} entries give the root ${TreeHead.base64(oldRoot!)}, the earlier checkpoint says ${
            TreeHead.base64(earlier.root)
          }: the log forked`
        )
      }
      const checked = Merkle.verifyConsistency(earlier.size, head.size, proof.roots()!, earlier.root, head.root)
      if (Result.isFailure(checked)) return yield* refused("since", "checkpoint", checked.failure.message)
    }
    return {
      origin: head.origin,
      id,
      size: head.size,
      root: head.root,
      signedBy: opened.verified.filter((v) => v.verifier.type === SignedNote.ED25519).map((v) => v.verifier.name),
      cosignedBy: opened.verified.filter((v) => v.verifier.type === SignedNote.COSIGNATURE_V1).map((v) => ({
        name: v.verifier.name,
        timestamp: Number(v.timestamp)
      })),
      hashesOnly,
      since: earlier?.size
    }
  })
