/**
 * Tiles of a session's tree and their verification from the files alone: paths as
 * C2SP tlog-tiles spells them; tiles from random trees (in one run or resumed from the
 * partial tiles of any size) agree with `Merkle`; every preimage reads back to its
 * entry; a published log verifies with the key alone, and any changed byte, a missing
 * or truncated file, another origin, or a fork from an earlier checkpoint is refused
 * with a `TilesRefused` saying why.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Entry, Merkle, SignedNote, TiledLog, Tiles, TreeHead } from "../src/index.ts"
import * as P from "../src/internal/preimage.ts"
import * as A from "./arbitraries.ts"

const SEED = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 31))

// Distinct leaf hashes, as many as the largest test needs.
const leafHashes = (n: number): Array<Uint8Array> =>
  Array.from({ length: n }, (_, i) => Merkle.leafHash(new Uint8Array([i & 0xff, (i >> 8) & 0xff, i >> 16, 7])))

const mth = (leaves: ReadonlyArray<Uint8Array>): Uint8Array => {
  const b = Merkle.builder()
  for (const l of leaves) b.appendLeafHash(l)
  return Merkle.root(b.range())
}

// The tile of level `level`, index `index`, width `width` by the specification's formula.
const expectedTile = (leaves: ReadonlyArray<Uint8Array>, tile: Tiles.Tile): Uint8Array => {
  const span = Tiles.TILE_WIDTH ** tile.level
  const out = new Uint8Array(tile.width * 32)
  for (let i = 0; i < tile.width; i++) {
    const start = (tile.index * Tiles.TILE_WIDTH + i) * span
    out.set(mth(leaves.slice(start, start + span)), i * 32)
  }
  return out
}

describe(`Tiles (seed ${SEED})`, () => {
  it("paths: x-prefixed groups of three digits, .p/W for partial tiles, entries beside the levels", () => {
    assert.strictEqual(Tiles.indexPath(0), "000")
    assert.strictEqual(Tiles.indexPath(5), "005")
    assert.strictEqual(Tiles.indexPath(1000), "x001/000")
    assert.strictEqual(Tiles.indexPath(1234067), "x001/x234/067")
    assert.strictEqual(Tiles.tilePath({ level: 0, index: 1234067, width: 256 }), "tile/0/x001/x234/067")
    assert.strictEqual(Tiles.tilePath({ level: 2, index: 3, width: 17 }), "tile/2/003.p/17")
    assert.strictEqual(Tiles.bundlePath(0, 5), "tile/entries/000.p/5")
    assert.strictEqual(Tiles.bundlePath(1000, 256), "tile/entries/x001/000")
  })

  it("a tree of 70,000: 273 full level-0 tiles and one of 112, one full level-1 tile and one of 17, one of 1 at level 2", () => {
    const leaves = leafHashes(70_000)
    const b = Tiles.builder()
    for (const l of leaves) b.push(l)
    const full = b.full()
    assert.strictEqual(full.filter((t) => t.tile.level === 0).length, 273)
    assert.strictEqual(full.filter((t) => t.tile.level === 1).length, 1)
    assert.strictEqual(full.length, 274)
    assert.deepStrictEqual(b.partials().map((t) => t.tile), [
      { level: 0, index: 273, width: 112 },
      { level: 1, index: 1, width: 17 },
      { level: 2, index: 0, width: 1 }
    ])
    assert.deepStrictEqual(Tiles.partialTiles(70_000), b.partials().map((t) => t.tile))
    assert.deepStrictEqual(b.partials()[1]!.hashes, expectedTile(leaves, { level: 1, index: 1, width: 17 }))
    assert.deepStrictEqual(Merkle.root(b.range()), mth(leaves))
    // 256 leaves: a full level-0 tile and a level-1 tile of width 1.
    const b256 = Tiles.builder()
    for (const l of leaves.slice(0, 256)) b256.push(l)
    assert.deepStrictEqual(b256.full().map((t) => t.tile), [{ level: 0, index: 0, width: 256 }])
    assert.deepStrictEqual(b256.partials().map((t) => t.tile), [{ level: 1, index: 0, width: 1 }])
  })

  it("property: tiles built in one run, or resumed from the partial tiles of any size, are the specification's and give Merkle's root", () => {
    const leaves = leafHashes(1400)
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1400 }), fc.integer({ min: 0, max: 1400 }), (a, b) => {
        const [m, n] = a <= b ? [a, b] : [b, a]
        const first = Tiles.builder()
        for (const l of leaves.slice(0, m)) first.push(l)
        const tiles = [...first.full()]
        const byLevel = Tiles.partialTiles(m).map((t) =>
          first.partials().find((p) => p.tile.level === t.level)?.hashes ?? new Uint8Array(0)
        )
        const resumed = Tiles.builder(m, byLevel)
        for (const l of leaves.slice(m, n)) resumed.push(l)
        tiles.push(...resumed.full(), ...resumed.partials())
        assert.deepStrictEqual(Merkle.root(resumed.range()), mth(leaves.slice(0, n)))
        assert.deepStrictEqual(Merkle.root(first.range()), mth(leaves.slice(0, m)))
        for (const t of tiles) {
          const within = t.tile.width === Tiles.TILE_WIDTH ? leaves : leaves.slice(0, n)
          assert.deepStrictEqual(t.hashes, expectedTile(within, t.tile), Tiles.tilePath(t.tile))
        }
        // Every tile the size needs is there, once.
        const paths = tiles.map((t) => Tiles.tilePath(t.tile))
        assert.strictEqual(new Set(paths).size, paths.length)
      }),
      { seed: SEED, numRuns: A.runs(60) }
    )
  })

  it("property: an entry's preimage reads back to the entry and hashes to its entry_hash", () => {
    fc.assert(
      fc.property(A.ops(30), (list) => {
        const { entries } = A.run({ entry_cap: 4096, tool_counts_cap: 4096 }, list)
        for (const e of entries) {
          const r = Tiles.readEntry(Tiles.preimage(e), "p", e.sequence)
          assert.isTrue(Result.isSuccess(r))
          if (Result.isSuccess(r)) {
            assert.strictEqual(r.success.entryHash, e.entry_hash)
            assert.deepStrictEqual(Entry.encode(r.success.entry!), Entry.encode(e))
          }
          const h = Tiles.readEntry(Tiles.bundleEntry(e, "hashes"), "p", e.sequence)
          assert.deepStrictEqual(Result.getOrThrow(h), { entryHash: e.entry_hash, entry: undefined })
        }
      }),
      { seed: SEED, numRuns: A.runs(100) }
    )
  })

  it("a bundle is u16-prefixed entries; a truncated one, or one with bytes after its entries, is refused", () => {
    const entries = [new Uint8Array([1, 2, 3]), new Uint8Array(0), new Uint8Array(300).fill(9)]
    const bytes = Tiles.encodeBundle(entries)
    assert.deepStrictEqual(Array.from(bytes.subarray(0, 5)), [0, 3, 1, 2, 3])
    assert.deepStrictEqual(Result.getOrThrow(Tiles.decodeBundle(bytes, 3, "b")), entries)
    const short = Tiles.decodeBundle(bytes.slice(0, -1), 3, "b")
    assert.strictEqual(Result.isFailure(short) && short.failure.reason, "bundle")
    const long = Tiles.decodeBundle(new Uint8Array([...bytes, 0]), 3, "b")
    assert.strictEqual(Result.isFailure(long) && long.failure.reason, "bundle")
    assert.throws(() => Tiles.encodeBundle([new Uint8Array(Tiles.MAX_BUNDLE_ENTRY + 1)]))
    // An entry whose preimage does not fit a u16 length travels as its hash.
    const [big] = A.run({ entry_cap: 10, tool_counts_cap: 10 }, [A.message("y".repeat(70_000))]).entries
    assert.strictEqual(Tiles.bundleEntry(big!, "entries").length, 32)
    const [small] = chain(1)
    assert.isAbove(Tiles.bundleEntry(small!, "entries").length, 32)
  })

  it("a name that starts with U+FEFF reads back with it (a decoder that drops a byte-order mark refused the entry)", () => {
    const [e] = A.run({ entry_cap: 10, tool_counts_cap: 10 }, [A.record("\ufeffread", { agent_id: "\ufeffa" })]).entries
    const r = Tiles.readEntry(Tiles.preimage(e!), "b", 0)
    assert.isTrue(Result.isSuccess(r))
    if (Result.isSuccess(r)) assert.deepStrictEqual(Entry.encode(r.success.entry!), Entry.encode(e!))
  })

  it("a preimage whose payload text is not canonical, or with a byte too many, is refused", () => {
    const spaced = P.otherPreimage(0, Entry.ZERO_HASH, 1, "message", `{"a": 1}`)
    const r = Tiles.readEntry(spaced, "b", 0)
    assert.deepInclude(Result.isFailure(r) ? r.failure : undefined, { reason: "bundle", path: "b" })
    const canonical = P.otherPreimage(0, Entry.ZERO_HASH, 1, "message", `{"a":1}`)
    assert.isTrue(Result.isSuccess(Tiles.readEntry(canonical, "b", 0)))
    assert.isTrue(Result.isFailure(Tiles.readEntry(new Uint8Array([...canonical, 0]), "b", 0)))
    assert.isTrue(Result.isFailure(Tiles.readEntry(canonical.subarray(0, 40), "b", 0)))
  })
})

// ---------------------------------------------------------------------------
// A published log in memory

const signer = Result.getOrThrow(SignedNote.generate("journal.example/t"))
const other = Result.getOrThrow(SignedNote.generate("journal.example/other"))

const publish = (
  entries: ReadonlyArray<Entry.Entry>,
  options?: { readonly content?: Tiles.Content; readonly id?: string; readonly key?: SignedNote.Signer }
) => {
  const files = new Map<string, Uint8Array>()
  const w = Tiles.writer(options?.content ?? "entries")
  for (const e of entries) {
    w.push(e)
    for (const f of w.full()) files.set(f.path, f.bytes)
  }
  for (const f of w.partials()) files.set(f.path, f.bytes)
  const key = options?.key ?? signer
  const head = TreeHead.make(TreeHead.origin(key.verifier.name, options?.id ?? "s"), w.range())
  const note = Result.getOrThrow(SignedNote.sign(TreeHead.text(head), [key]))
  files.set("checkpoint", new TextEncoder().encode(note))
  return { files, note }
}

const readFrom = (files: ReadonlyMap<string, Uint8Array>): TiledLog.Read<never> => (path) =>
  Effect.succeed(files.get(path))

const check = (files: ReadonlyMap<string, Uint8Array>, since?: string) =>
  Effect.runSyncExit(TiledLog.verify(readFrom(files), { verifiers: [signer.verifier], since }))

const refusal = (exit: Exit.Exit<unknown, Tiles.TilesRefused>) => {
  if (Exit.isSuccess(exit)) return undefined
  const e = exit.cause.reasons.find((r) => r._tag === "Fail")
  return e !== undefined && "error" in e ? (e.error as Tiles.TilesRefused) : undefined
}

const chain = (n: number, salt = 0) => {
  const list: Array<A.Op> = []
  for (let i = 0; i < n; i++) {
    list.push(
      i % 3 === 2 ? A.message({ i, salt, text: "x".repeat(i % 50) }) : A.record(`tool-${i}-${salt}`, { bytes_read: i })
    )
  }
  return A.run({ entry_cap: 100_000, tool_counts_cap: 4096 }, list).entries
}

describe(`TiledLog.verify (seed ${SEED})`, () => {
  const entries = chain(600)

  it("a published log verifies with the key alone, whole or hashes only, and extends its earlier checkpoints", () => {
    const { files } = publish(entries)
    const ok = check(files)
    assert.isTrue(Exit.isSuccess(ok))
    if (Exit.isSuccess(ok)) {
      assert.include(ok.value, { id: "s", size: 600, hashesOnly: 0, origin: "journal.example/t/s" })
      assert.deepStrictEqual(ok.value.signedBy, ["journal.example/t"])
    }
    const hashes = check(publish(entries, { content: "hashes" }).files)
    assert.strictEqual(Exit.isSuccess(hashes) && hashes.value.hashesOnly, 600)
    for (const m of [0, 1, 255, 256, 257, 599, 600]) {
      const earlier = publish(entries.slice(0, m)).note
      const r = check(files, earlier)
      assert.isTrue(Exit.isSuccess(r), `since ${m}: ${String(refusal(r)?.message)}`)
    }
    assert.isTrue(Exit.isSuccess(check(publish([]).files)))
  })

  it("an entry too long for a bundle goes as its hash; the log verifies, counts it, and still checks the next entry's link to it", () => {
    const list = [A.record("a"), A.message("z".repeat(70_000)), A.record("b"), A.record("c")]
    const withBig = A.run({ entry_cap: 100, tool_counts_cap: 100 }, list).entries
    const { files } = publish(withBig)
    const ok = check(files)
    assert.strictEqual(Exit.isSuccess(ok) && ok.value.hashesOnly, 1)
    // The entry after it re-linked elsewhere: refused at the link, though the big one shows no content.
    const other = A.run({ entry_cap: 100, tool_counts_cap: 100 }, [A.record("a"), A.message("y".repeat(70_000))])
      .entries[1]!
    const moved = [withBig[0]!, other, withBig[2]!, withBig[3]!]
    assert.strictEqual(refusal(check(publish(moved).files))?.reason, "chain")
  })

  it("a partial tile or bundle replaced by the full one is read from the full one", () => {
    const older = publish(entries.slice(0, 300))
    const newer = publish(entries)
    // Both runs' files, each partial one whose full file exists removed, as publishing does.
    const files = new Map([...older.files, ...newer.files])
    for (const path of Array.from(files.keys())) {
      if (/\.p\/\d+$/.test(path) && files.has(path.replace(/\.p\/\d+$/, ""))) files.delete(path)
    }
    assert.isFalse(files.has("tile/entries/001.p/44"))
    files.set("checkpoint", older.files.get("checkpoint")!)
    assert.isTrue(Exit.isSuccess(check(files)))
  })

  it("property: any byte changed in any file, or a file cut short, is refused with a reason", () => {
    const { files } = publish(entries.slice(0, 300))
    const paths = [...files.keys()].sort()
    fc.assert(
      fc.property(
        fc.constantFrom(...paths),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        fc.boolean(),
        (path, at, flip, cut) => {
          const bytes = files.get(path)!
          const changed = cut ? bytes.slice(0, at % bytes.length) : bytes.slice()
          if (!cut) changed[at % bytes.length]! ^= flip
          const tampered = new Map(files)
          tampered.set(path, changed)
          const r = refusal(check(tampered))
          assert.isDefined(r, `${path} ${cut ? "cut" : "changed"} at ${at % bytes.length} was accepted`)
          assert.include(["checkpoint", "tile", "bundle", "chain", "root"], r!.reason)
        }
      ),
      { seed: SEED, numRuns: A.runs(200) }
    )
  })

  it("refuses a missing tile, a rewritten full tile, another session's checkpoint, another key, a fork", () => {
    const { files } = publish(entries)
    const missing = new Map(files)
    missing.delete("tile/0/001")
    assert.strictEqual(refusal(check(missing))?.reason, "tile")

    const rewritten = new Map(files)
    const tile = rewritten.get("tile/0/000")!.slice()
    tile.set(rewritten.get("tile/0/001")!.subarray(0, 32), 0)
    rewritten.set("tile/0/000", tile)
    assert.deepInclude(refusal(check(rewritten)), { reason: "tile", path: "tile/0/000" })

    const otherSession = new Map(files)
    otherSession.set("checkpoint", publish(entries, { id: "t" }).files.get("checkpoint")!)
    const r = check(otherSession, publish(entries.slice(0, 10)).note)
    assert.strictEqual(refusal(r)?.reason, "since")

    const otherKey = new Map(files)
    otherKey.set("checkpoint", publish(entries, { key: other }).files.get("checkpoint")!)
    assert.strictEqual(refusal(check(otherKey))?.reason, "checkpoint")

    const wrongRoot = new Map(files)
    wrongRoot.set("checkpoint", publish(chain(600, 1)).files.get("checkpoint")!)
    assert.include(["tile", "root"], refusal(check(wrongRoot))?.reason)

    // The same session rewritten from entry 100 on and published again: the earlier
    // checkpoint of 200 entries catches it.
    const forked = publish([...entries.slice(0, 100), ...chain(600, 2).slice(100)].map(relink()))
    const before = publish(entries.slice(0, 200)).note
    assert.isTrue(Exit.isSuccess(check(forked.files)))
    assert.deepInclude(refusal(check(forked.files, before)), { reason: "since" })
    assert.strictEqual(refusal(check(publish(entries.slice(0, 150)).files, before))?.reason, "since")
  })

  it("refuses entries that do not chain: an entry moved, or one whose link was rewritten", () => {
    const swapped = entries.slice(0, 10)
    ;[swapped[3], swapped[4]] = [swapped[4]!, swapped[3]!]
    assert.strictEqual(refusal(check(publish(swapped).files))?.reason, "chain")
    const cut = [...entries.slice(0, 3), ...entries.slice(4, 10)]
    assert.strictEqual(refusal(check(publish(cut).files))?.reason, "chain")
  })
})

// Entries re-linked and re-hashed in order (a rewritten history that is a valid chain).
const relink = () => {
  let prev = Entry.ZERO_HASH
  return (e: Entry.Entry, i: number): Entry.Entry => {
    const base = { ...e, sequence: i, prev_hash: prev }
    const entry_hash = Entry.computeHash(base)
    prev = entry_hash
    return { ...base, entry_hash }
  }
}
