/**
 * Property tests of the mirror planner and its verdict. Files are compared by
 * content: for any source and mirror, each source path gets the action its bytes
 * call for (a mirrored copy that is a byte prefix is extended or unchanged,
 * anything else is copied again, whatever the sizes), mirror-only files are kept,
 * and executing the plan on an in-memory model leaves every regular source file
 * byte-identical in the mirror. `judge` publishes exactly the copies that extend
 * the backup.
 */
import { assert, describe, it } from "@effect/vitest"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import * as fc from "fast-check"
import * as Mirror from "../src/Mirror.ts"

type Tree = Map<string, { readonly type: "file" | "symlink" | "other"; readonly bytes: Uint8Array }>

const pathArb = fc.constantFrom("checkpoint.json", "00000000000000000000.jsonl", "00000000000000004096.jsonl", "x", "d")
const bytesArb = fc.uint8Array({ maxLength: 24 })

const sourceArb: fc.Arbitrary<Tree> = fc
  .array(
    fc.tuple(
      pathArb,
      fc.constantFrom("file", "file", "file", "symlink", "other") as fc.Arbitrary<"file" | "symlink" | "other">,
      bytesArb
    ),
    { maxLength: 6 }
  )
  .map((rows) => new Map(rows.map(([p, type, bytes]) => [p, { type, bytes }])))

// A mirror derived from a source: files as a prefix of the source (a previous
// run), damaged, longer, of the same length with other bytes, or foreign.
const mirrorArb = (source: Tree): fc.Arbitrary<Map<string, Uint8Array>> =>
  fc.array(
    fc.tuple(
      fc.oneof(pathArb, fc.constantFrom("only-in-mirror", "z")),
      fc.constantFrom("prefix", "damaged", "longer", "same-size", "random"),
      bytesArb,
      fc.nat()
    ),
    { maxLength: 7 }
  ).map((rows) => {
    const m = new Map<string, Uint8Array>()
    for (const [p, how, random, n] of rows) {
      const src = source.get(p)?.bytes
      if (src === undefined || how === "random") m.set(p, random)
      else if (how === "prefix") m.set(p, src.slice(0, n % (src.length + 1)))
      else if (how === "longer") m.set(p, concat(src, random.length > 0 ? random : Uint8Array.of(1)))
      else if (how === "same-size") m.set(p, src.map((b, i) => (i === n % src.length ? b ^ 0x5a : b)))
      else {
        const copy = src.slice(0, n % (src.length + 1))
        if (copy.length > 0) copy[n % copy.length] = copy[n % copy.length]! ^ 0xff
        m.set(p, copy)
      }
    }
    return m
  })

const concat = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  const out = new Uint8Array(a.length + b.length)
  out.set(a, 0)
  out.set(b, a.length)
  return out
}

const equalBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i])
const isPrefixOf = (a: Uint8Array, b: Uint8Array) => a.length <= b.length && equalBytes(a, b.subarray(0, a.length))
const hash = (b: Uint8Array): string => bytesToHex(sha256(b))

const mirrored = (m: Map<string, Uint8Array>): Map<string, Mirror.MirroredFile> =>
  new Map(Array.from(m, ([p, b]) => [p, { size: b.length, hash: hash(b) }]))

// The executor's side: hash the source prefix the planner asks for.
const listing = (tree: Tree, mirror: Map<string, Uint8Array>): Array<Mirror.SourceFile> =>
  Array.from(tree, ([path, f]) => {
    const file = { path, type: f.type, size: f.bytes.length }
    const m = mirror.get(path)
    const length = Mirror.prefixLength(file, m === undefined ? undefined : { size: m.length, hash: hash(m) })
    return length === null ? file : { ...file, prefix: { length, hash: hash(f.bytes.subarray(0, length)) } }
  })

// The executor as a model: what the real one does to files, done to byte arrays.
const execute = (source: Tree, mirror: Map<string, Uint8Array>): Mirror.Plan => {
  const plan = Mirror.plan(listing(source, mirror), mirrored(mirror))
  for (const action of plan.actions) {
    const src = source.get(action.path)!.bytes
    switch (action._tag) {
      case "Copy":
      case "Recopy":
        mirror.set(action.path, src.slice())
        break
      case "Extend":
        mirror.set(action.path, concat(mirror.get(action.path)!.subarray(0, action.from), src.slice(action.from)))
        break
      case "Unchanged":
      case "Skip":
        break
    }
  }
  return plan
}

const pairArb = sourceArb.chain((s) => fc.tuple(fc.constant(s), mirrorArb(s)))

describe("Mirror.plan", () => {
  it("chooses each action from the content: a byte prefix is extended or unchanged, anything else copied again", () => {
    fc.assert(
      fc.property(pairArb, ([source, mirror]) => {
        const plan = Mirror.plan(listing(source, mirror), mirrored(mirror))
        assert.deepStrictEqual(plan.actions.map((a) => a.path), Array.from(source.keys()).sort())
        for (const action of plan.actions) {
          const src = source.get(action.path)!
          const m = mirror.get(action.path)
          const expected = src.type !== "file"
            ? "Skip"
            : m === undefined
            ? "Copy"
            : !isPrefixOf(m, src.bytes)
            ? "Recopy"
            : m.length === src.bytes.length
            ? "Unchanged"
            : "Extend"
          assert.strictEqual(action._tag, expected, action.path)
          if (action._tag === "Extend") assert.strictEqual(action.from, m!.length)
        }
        assert.deepStrictEqual(plan.kept, Array.from(mirror.keys()).filter((p) => !source.has(p)).sort())
      })
    )
  })

  it("never leaves a same-size file with other bytes alone", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 64 }), fc.nat(), (bytes, n) => {
        const other = bytes.map((b, i) => (i === n % bytes.length ? b ^ 1 : b))
        const action = Mirror.planFile(
          { path: "s", type: "file", size: bytes.length, prefix: { length: other.length, hash: hash(bytes) } },
          { size: other.length, hash: hash(other) }
        )
        assert.strictEqual(action._tag, "Recopy")
      })
    )
  })

  it("copies again when the executor could not hash the prefix the mirror needs", () => {
    const m = { size: 3, hash: hash(Uint8Array.of(1, 2, 3)) }
    assert.strictEqual(Mirror.planFile({ path: "s", type: "file", size: 5 }, m)._tag, "Recopy")
    assert.strictEqual(
      Mirror.planFile({ path: "s", type: "file", size: 5, prefix: { length: 2, hash: m.hash } }, m)._tag,
      "Recopy"
    )
    assert.strictEqual(Mirror.planFile({ path: "s", type: "file", size: 2 }, m)._tag, "Recopy")
  })

  it("executed, makes every regular file equal to the source and keeps the rest", () => {
    fc.assert(
      fc.property(pairArb, ([source, mirror]) => {
        const before = new Map(mirror)
        execute(source, mirror)
        for (const [path, file] of source) {
          if (file.type === "file") assert.isTrue(equalBytes(mirror.get(path)!, file.bytes), path)
          else assert.strictEqual(mirror.get(path), before.get(path), `${path} (not a regular file) untouched`)
        }
        for (const [path, bytes] of before) {
          if (!source.has(path)) assert.strictEqual(mirror.get(path), bytes, `${path} kept`)
        }
        // A second run over the same source has nothing left to do.
        const again = Mirror.plan(listing(source, mirror), mirrored(mirror))
        assert.isTrue(again.actions.every((a) => a._tag === "Unchanged" || a._tag === "Skip"))
        assert.strictEqual(Mirror.published(again, verified(["x"]), verified(["x"])), "unchanged")
      })
    )
  })

  it("extends append-only growth without rewriting the mirrored prefix", () => {
    fc.assert(
      fc.property(bytesArb, bytesArb, (first, more) => {
        const mirror = new Map<string, Uint8Array>()
        const one = execute(new Map([["s", { type: "file", bytes: first }]]), mirror)
        assert.strictEqual(Mirror.published(one, null, verified(["x"])), "copied")
        const two = execute(new Map([["s", { type: "file", bytes: concat(first, more) }]]), mirror)
        assert.strictEqual(two.actions[0]!._tag, more.length === 0 ? "Unchanged" : "Extend")
        assert.strictEqual(
          Mirror.published(two, verified(["x"]), verified(["x", "y"])),
          more.length === 0 ? "unchanged" : "extended"
        )
        if (more.length > 0) assert.strictEqual(Mirror.published(two, verified(["x"]), verified(["x"])), "copied")
        const outcome = Mirror.outcomeOf(two.actions[0]!)
        if (more.length > 0) assert.deepStrictEqual(outcome, { _tag: "Extended", path: "s", bytes: more.length })
        assert.isTrue(equalBytes(mirror.get("s")!, concat(first, more)))
      })
    )
  })
})

// A chain as a list of entry hashes (entry i's hash commits to entries 0..i).
const chainArb = fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 12 }).map((xs) => {
  const hashes: Array<string> = []
  for (const x of xs) hashes.push(hash(new TextEncoder().encode(`${hashes[hashes.length - 1] ?? ""}${x}`)))
  return hashes
})
const verified = (chain: ReadonlyArray<string>): Mirror.Verified => ({
  ok: true,
  nextSequence: chain.length,
  head: chain[chain.length - 1] ?? "0".repeat(64)
})
const compare = (backup: ReadonlyArray<string>, staged: ReadonlyArray<string>): Mirror.Comparison => ({
  backup: verified(backup),
  staged: verified(staged),
  backupLast: backup[backup.length - 1] ?? null,
  stagedAtBackupLast: backup.length === 0 ? null : staged[backup.length - 1] ?? null
})

describe("Mirror.judge", () => {
  it("publishes exactly the copies whose chain extends the backup's", () => {
    fc.assert(
      fc.property(chainArb, chainArb, (backup, staged) => {
        const extendsBackup = backup.length <= staged.length && backup.every((h, i) => staged[i] === h)
        assert.strictEqual(Mirror.judge(compare(backup, staged))._tag, extendsBackup ? "Publish" : "Refuse")
      })
    )
  })

  it("refuses a source cut short, whatever its own verification says", () => {
    fc.assert(
      fc.property(chainArb.filter((c) => c.length > 1), fc.nat(), (chain, n) => {
        const cut = chain.slice(0, n % chain.length)
        const verdict = Mirror.judge(compare(chain, cut))
        assert.strictEqual(verdict._tag, "Refuse")
        if (verdict._tag === "Refuse") assert.match(verdict.reason, /fewer than/)
        // A checkpoint that still claims every entry while the segments lost the last ones.
        const claims = Mirror.judge({ ...compare(chain, chain), stagedAtBackupLast: null })
        assert.strictEqual(claims._tag, "Refuse")
      })
    )
  })

  it("publishes any verified copy when there is no backup, never one that does not verify", () => {
    assert.deepStrictEqual(
      Mirror.judge({ backup: null, staged: verified(["x"]), backupLast: null, stagedAtBackupLast: null }),
      { _tag: "Publish" }
    )
    assert.strictEqual(
      Mirror.judge({
        backup: null,
        staged: { ...verified(["x"]), ok: false },
        backupLast: null,
        stagedAtBackupLast: null
      })._tag,
      "Refuse"
    )
    assert.strictEqual(
      Mirror.judge({ ...compare(["x"], ["x", "y"]), backup: { ...verified(["x"]), ok: false } })._tag,
      "Refuse"
    )
  })
})
