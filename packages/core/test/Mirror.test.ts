/**
 * Property tests of the mirror planner: for any source and mirror, each source
 * path gets exactly the action its sizes call for, mirror-only files are kept, and
 * executing the plan on an in-memory model (with the prefix check) leaves every
 * regular source file byte-identical in the mirror while mirror-only files stay
 * untouched. Runs of a growing source converge after one more run.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Mirror } from "../src/index.ts"

type Tree = Map<string, { readonly type: "file" | "symlink" | "other"; readonly bytes: Uint8Array }>

const pathArb = fc.constantFrom("a/checkpoint.json", "a/0.jsonl", "a/4096.jsonl", "b/0.jsonl", "c/x", "d", "e/f/g")
const bytesArb = fc.uint8Array({ maxLength: 24 })

const sourceArb: fc.Arbitrary<Tree> = fc
  .array(fc.tuple(pathArb, fc.constantFrom("file", "file", "file", "symlink", "other") as fc.Arbitrary<"file" | "symlink" | "other">, bytesArb), { maxLength: 7 })
  .map((rows) => new Map(rows.map(([p, type, bytes]) => [p, { type, bytes }])))

// A mirror derived from a source: some files as a prefix of the source (a
// previous run), some damaged, some longer, some foreign.
const mirrorArb = (source: Tree): fc.Arbitrary<Map<string, Uint8Array>> =>
  fc.array(
    fc.tuple(
      fc.oneof(pathArb, fc.constantFrom("only/in/mirror", "z")),
      fc.constantFrom("prefix", "damaged", "longer", "random"),
      bytesArb,
      fc.nat()
    ),
    { maxLength: 8 }
  ).map((rows) => {
    const m = new Map<string, Uint8Array>()
    for (const [p, how, random, n] of rows) {
      const src = source.get(p)?.bytes
      if (src === undefined || how === "random") m.set(p, random)
      else if (how === "prefix") m.set(p, src.slice(0, n % (src.length + 1)))
      else if (how === "longer") m.set(p, concat(src, random.length > 0 ? random : Uint8Array.of(1)))
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

const listing = (tree: Tree): Array<Mirror.SourceFile> =>
  Array.from(tree, ([path, f]) => ({ path, type: f.type, size: f.bytes.length }))

const sizes = (m: Map<string, Uint8Array>) => new Map(Array.from(m, ([p, b]) => [p, b.length]))

// The executor as a model: what the real one does to files, done to byte arrays.
const execute = (source: Tree, mirror: Map<string, Uint8Array>): Array<Mirror.Outcome> => {
  const plan = Mirror.plan(listing(source), sizes(mirror))
  return plan.actions.map((action): Mirror.Outcome => {
    const src = source.get(action.path)!.bytes
    switch (action._tag) {
      case "Skip":
        return { _tag: "Skipped", path: action.path, reason: action.reason }
      case "Copy":
        mirror.set(action.path, src.slice())
        return { _tag: "Copied", path: action.path, bytes: src.length }
      case "Recopy":
        mirror.set(action.path, src.slice())
        return { _tag: "Refreshed", path: action.path, bytes: src.length }
      case "Extend": {
        const have = mirror.get(action.path)!
        const checked = Mirror.afterPrefixCheck(action, equalBytes(have, src.slice(0, action.from)))
        if (checked._tag === "Recopy") {
          mirror.set(action.path, src.slice())
          return { _tag: "Refreshed", path: action.path, bytes: src.length }
        }
        mirror.set(action.path, concat(have, src.slice(checked.from)))
        return { _tag: "Extended", path: action.path, bytes: src.length - checked.from }
      }
    }
  })
}

describe("Mirror.plan", () => {
  it("chooses each action from the sizes alone", () => {
    fc.assert(
      fc.property(sourceArb.chain((s) => fc.tuple(fc.constant(s), mirrorArb(s))), ([source, mirror]) => {
        const plan = Mirror.plan(listing(source), sizes(mirror))
        assert.deepStrictEqual(plan.actions.map((a) => a.path), Array.from(source.keys()).sort())
        for (const action of plan.actions) {
          const src = source.get(action.path)!
          const mirrored = mirror.get(action.path)?.length
          const expected = src.type === "symlink"
            ? "Skip"
            : src.type !== "file"
            ? "Skip"
            : mirrored === undefined
            ? "Copy"
            : src.bytes.length > mirrored
            ? "Extend"
            : src.bytes.length < mirrored
            ? "Recopy"
            : "Skip"
          assert.strictEqual(action._tag, expected, action.path)
          if (action._tag === "Extend") assert.strictEqual(action.from, mirrored)
        }
        assert.deepStrictEqual(plan.kept, Array.from(mirror.keys()).filter((p) => !source.has(p)).sort())
      })
    )
  })

  it("executed with the prefix check, makes every regular file equal and keeps the rest", () => {
    fc.assert(
      fc.property(sourceArb.chain((s) => fc.tuple(fc.constant(s), mirrorArb(s))), ([source, mirror]) => {
        const before = new Map(mirror)
        const outcomes = execute(source, mirror)
        for (const [path, file] of source) {
          if (file.type === "file") {
            const copy = mirror.get(path)!
            // Equal size but different bytes is the one case a size-only plan
            // leaves alone; everything else must now match.
            if (!(before.has(path) && before.get(path)!.length === file.bytes.length)) {
              assert.isTrue(equalBytes(copy, file.bytes), path)
            }
          } else {
            assert.strictEqual(mirror.get(path), before.get(path), `${path} (not a regular file) untouched`)
          }
        }
        for (const [path, bytes] of before) {
          if (!source.has(path)) assert.strictEqual(mirror.get(path), bytes, `${path} kept`)
        }
        const summary = Mirror.summarize(outcomes, Mirror.plan(listing(source), sizes(before)).kept.length)
        assert.strictEqual(summary.copied + summary.extended + summary.refreshed + summary.skipped, source.size)
        assert.strictEqual(summary.failed, 0)
        // A second run over the same source has nothing left to do.
        const again = Mirror.plan(listing(source), sizes(mirror))
        assert.isTrue(again.actions.every((a) => a._tag === "Skip"))
      })
    )
  })

  it("extends append-only growth without rewriting the mirrored prefix", () => {
    fc.assert(
      fc.property(bytesArb, bytesArb, (first, more) => {
        const mirror = new Map<string, Uint8Array>()
        execute(new Map([["s/0.jsonl", { type: "file", bytes: first }]]), mirror)
        const outcomes = execute(new Map([["s/0.jsonl", { type: "file", bytes: concat(first, more) }]]), mirror)
        assert.strictEqual(outcomes[0]!._tag, more.length === 0 ? "Skipped" : "Extended")
        if (more.length > 0) assert.strictEqual((outcomes[0] as { bytes: number }).bytes, more.length)
        assert.isTrue(equalBytes(mirror.get("s/0.jsonl")!, concat(first, more)))
      })
    )
  })
})
