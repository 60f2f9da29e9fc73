/**
 * The policy file: random policies round-trip through encode and decode and give the
 * same verdicts (reason and guard name included) as the same guard built by hand,
 * on random call sequences; bad documents name the JSON path and what was expected.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Guard, JournalState, Policy } from "../src/index.ts"
import * as A from "./arbitraries.ts"
import { built, decoded } from "./policies.ts"

const problems = (text: string): Array<string> => {
  const r = Policy.decodeText(text)
  if (Result.isSuccess(r)) return assert.fail(`decoded: ${text}`)
  return r.failure.issues.map((i) => `${i.path}: ${i.message}`)
}

describe("Policy: decode, encode and meaning", () => {
  it("property: JSON → decode → encode gives the JSON back, through text too", () => {
    fc.assert(
      fc.property(built, (b) => {
        const p = decoded(b.json)
        assert.deepStrictEqual(Policy.encode(p), b.json)
        const again = Policy.decodeText(JSON.stringify(Policy.encode(p)))
        assert.isTrue(Result.isSuccess(again))
        assert.deepStrictEqual(Result.getOrThrow(again), p)
      }),
      { numRuns: A.runs(300) }
    )
  })

  it("property: the decoded guard gives the hand-built guard's verdicts on random call sequences", () => {
    fc.assert(
      fc.property(
        built,
        A.caps,
        A.ops(16),
        fc.array(A.toolParams, { minLength: 1, maxLength: 4 }),
        (b, caps, ops, calls) => {
          const fromFile = Policy.toGuard(decoded(b.json))
          // A top-level array means `all`.
          const asArray = "all" in (b.json as object)
            ? Policy.toGuard(decoded((b.json as { all: Array<unknown> }).all))
            : null
          for (const state of A.run(caps, ops).states) {
            const s = JournalState.snapshot(state)
            for (const p of calls) {
              const expected = b.guard(s, p)
              assert.deepStrictEqual(fromFile(s, p), expected)
              if (asArray !== null) assert.deepStrictEqual(asArray(s, p), expected)
            }
          }
        }
      ),
      { numRuns: A.runs(150) }
    )
  })

  it("format writes the notation denials name their guard with", () => {
    const p = decoded([
      { maxStreak: 3 },
      { forbiddenTransitions: [["Write", "Bash"]] },
      { any: [{ allowList: ["Read"] }, { maxBytesRead: 5 }] }
    ])
    assert.strictEqual(
      Policy.format(p),
      "all(maxStreak(3), forbiddenTransitions([[\"Write\",\"Bash\"]]), any(allowList([\"Read\"]), maxBytesRead(5)))"
    )
    assert.strictEqual(Policy.size(p), 4)
    const v = Policy.toGuard(decoded({ maxStreak: 3 }))(
      JournalState.snapshot(A.run({}, [A.record("Bash"), A.record("Bash"), A.record("Bash")]).states.at(-1)!),
      A.call("Bash")
    )
    assert.deepStrictEqual(v, Guard.deny("Bash would run more than 3 times in a row", "maxStreak(3)"))
  })

  it("an Object.prototype key in requirePredecessors is an own key and keeps its meaning", () => {
    const p = decoded(JSON.parse(`{"requirePredecessors":{"__proto__":["Read"]}}`))
    assert.deepStrictEqual(Object.keys(Policy.encode(p).requirePredecessors!), ["__proto__"])
    const v = Policy.toGuard(p)(JournalState.snapshot(JournalState.empty("s")), A.call("__proto__"))
    assert.isTrue(v._tag === "Deny" && v.guard === "requirePredecessors({\"__proto__\":[\"Read\"]})")
  })
})

describe("Policy: a policy built in code is held to the file's rules", () => {
  const empty = JournalState.snapshot(JournalState.empty("s"))
  it("an object with two rules (which TypeScript lets through) denies every call, naming why", () => {
    // Both keys are known to the union, so the literal type-checks; compiled as it
    // was, one of the two rules was silently dropped and Bash ran.
    const twoRules: Policy.Policy = { denyList: ["Bash"], maxStreak: 3 }
    for (const tool of ["Bash", "Read"]) {
      const v = Policy.toGuard(twoRules)(empty, A.call(tool))
      assert.strictEqual(v._tag, "Deny", tool)
      assert.include(v._tag === "Deny" ? v.reason : "", "the policy is invalid")
      assert.include(v._tag === "Deny" ? v.reason : "", "expected exactly one of the keys")
    }
  })

  it("a value out of range denies every call; a valid one decides as its decoded file does", () => {
    const v = Policy.toGuard({ maxInvocations: -1 })(empty, A.call("Read"))
    assert.isTrue(v._tag === "Deny" && v.reason.includes("the policy is invalid"))
    const valid: Policy.Policy = { all: [{ denyList: ["Bash"] }, { maxStreak: 3 }] }
    assert.deepStrictEqual(Policy.toGuard(valid)(empty, A.call("Read")), Guard.allow)
    assert.deepStrictEqual(
      Policy.toGuard(valid)(empty, A.call("Bash")),
      Policy.toGuard(decoded(Policy.encode(valid)))(empty, A.call("Bash"))
    )
  })
})

describe("Policy: a bad document names the JSON path and what was expected", () => {
  it("values of the wrong kind, at any depth", () => {
    assert.deepStrictEqual(problems(`{"all":[{"maxStreak":1},{"denyList":[]},{"maxStreak":-1}]}`), [
      "$.all[2].maxStreak: expected a non-negative integer up to 2^53 - 1, got -1"
    ])
    assert.deepStrictEqual(problems(`[{"maxStreak":"3"}]`), [
      "$[0].maxStreak: expected a non-negative integer, got \"3\""
    ])
    assert.deepStrictEqual(problems(`{"maxBytesRead":1.5}`), [
      "$.maxBytesRead: expected a non-negative integer up to 2^53 - 1, got 1.5"
    ])
    assert.deepStrictEqual(problems(`{"maxBytesRead":9007199254740992}`), [
      "$.maxBytesRead: expected a non-negative integer up to 2^53 - 1, got 9007199254740992"
    ])
    assert.deepStrictEqual(problems(`{"all":3}`), ["$.all: expected an array of policies, got 3"])
    assert.deepStrictEqual(problems(`{"any":[3]}`), ["$.any[0]: expected a policy object, got 3"])
    assert.deepStrictEqual(problems(`"all"`), [
      "$: expected a policy: an object with one key, or an array of them, got \"all\""
    ])
  })

  it("tool names, pairs and predecessor maps", () => {
    assert.deepStrictEqual(problems(`{"allowList":["Read",""]}`), [
      "$.allowList[1]: expected a tool name (not empty, no surrounding whitespace or control characters), got \"\""
    ])
    assert.deepStrictEqual(problems(`{"forbiddenTransitions":[["Write"]]}`), [
      "$.forbiddenTransitions[0][1]: missing, expected a pair [from, to] of tool names"
    ])
    assert.deepStrictEqual(problems(`{"forbiddenTransitions":[["Write","Bash","Read"]]}`), [
      "$.forbiddenTransitions[0][2]: unexpected element, expected a pair [from, to] of tool names"
    ])
    assert.deepStrictEqual(problems(`{"requirePredecessors":{"Bash":"Read"}}`), [
      "$.requirePredecessors.Bash: expected an array of tool names, got \"Read\""
    ])
    assert.deepStrictEqual(problems(`{"requirePredecessors":{" Bash":["Read"]}}`), [
      "$.requirePredecessors: expected keys that are tool names, got \" Bash\""
    ])
    assert.deepStrictEqual(problems(`{"denyList":["\\ud800"]}`), [
      "$.denyList[0]: expected JSON (well-formed strings, finite numbers)"
    ])
  })

  it("exactly one key per object; unknown keys refused; every problem listed", () => {
    const keys = Policy.keys.join(", ")
    assert.deepStrictEqual(problems(`{"maxStreak":3,"denyList":[]}`), [
      `$: expected exactly one of the keys ${keys}, got "maxStreak", "denyList"`
    ])
    assert.deepStrictEqual(problems(`{"all":[{}]}`), [`$.all[0]: expected exactly one of the keys ${keys}, got none`])
    const unknown = `unknown key, expected one of ${keys} or a modifier (reason, of, per)`
    assert.deepStrictEqual(problems(`{"all":[{"maxStreek":3}]}`), [`$.all[0].maxStreek: ${unknown}`])
    assert.deepStrictEqual(problems(`{"maxStreak":3,"a b":1}`), [`$["a b"]: ${unknown}`])
    assert.deepStrictEqual(problems(`[{"maxStreak":-1},{"denyList":[1]}]`), [
      "$[0].maxStreak: expected a non-negative integer up to 2^53 - 1, got -1",
      "$[1].denyList[0]: expected a tool name (not empty, no surrounding whitespace or control characters), got 1"
    ])
  })

  it("not JSON, and nesting past the bound, are refused without recursing", () => {
    const [notJson] = problems(`{"maxStreak":3`)
    assert.match(notJson!, /^\$: expected JSON: /)
    const deep = "[".repeat(100_000) + "]".repeat(100_000)
    assert.deepStrictEqual(problems(deep), [`$: nested deeper than ${Policy.MAX_DEPTH} levels`])
    let nested: unknown = { maxStreak: 1 }
    for (let i = 0; i < 31; i++) nested = { all: [nested] }
    assert.isTrue(Result.isSuccess(Policy.decode(nested)))
    assert.isTrue(Result.isFailure(Policy.decode({ all: [nested] })))
  })

  it("property: decoding is total — any JSON or text gives a policy or issues with paths, never a throw", () => {
    const nearPolicy = fc.letrec<{ v: unknown }>((tie) => ({
      v: fc.oneof(
        { depthSize: "small" },
        fc.jsonValue({ maxDepth: 2 }),
        fc.record({ k: fc.constantFrom(...Policy.keys, "x", "__proto__"), v: tie("v") }).map(({ k, v }) =>
          JSON.parse(`{${JSON.stringify(k)}:${JSON.stringify(v) ?? "null"}}`)
        ),
        fc.array(tie("v"), { maxLength: 3 })
      )
    })).v
    fc.assert(
      fc.property(nearPolicy, fc.string({ maxLength: 40 }), (json, text) => {
        for (const r of [Policy.decode(json), Policy.decodeText(text), Policy.decodeText(JSON.stringify(json) ?? "")]) {
          if (Result.isFailure(r)) {
            assert.isAbove(r.failure.issues.length, 0)
            for (const i of r.failure.issues) assert.match(i.path, /^\$/)
          } else {
            // What decodes encodes back to something that decodes to the same policy.
            assert.deepStrictEqual(Result.getOrThrow(Policy.decode(Policy.encode(r.success))), r.success)
          }
        }
      }),
      { numRuns: A.runs(300) }
    )
  })

  it("the error's message joins every issue", () => {
    const r = Policy.decodeText(`{"all":[{"maxStreak":-1}]}`)
    assert.isTrue(Result.isFailure(r))
    if (Result.isFailure(r)) {
      assert.strictEqual(r.failure._tag, "InvalidPolicy")
      assert.strictEqual(
        r.failure.message,
        "$.all[0].maxStreak: expected a non-negative integer up to 2^53 - 1, got -1"
      )
    }
  })
})
