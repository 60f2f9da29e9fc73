/**
 * Validation is linear in its input: identity fields full of inner whitespace (the
 * old end-anchored regex trim was quadratic) and the Rust `trim` it implements.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Entry } from "../src/index.ts"
import * as A from "./arbitraries.ts"

const reference = (s: string): string => s.replace(/^\p{White_Space}+/u, "").replace(/\p{White_Space}+$/u, "")

const whiteSpace = [
  "\t",
  "\n",
  "\u000b",
  "\f",
  "\r",
  " ",
  "\u0085",
  "\u00a0",
  "\u1680",
  "\u2000",
  "\u2005",
  "\u200a",
  "\u2028",
  "\u2029",
  "\u202f",
  "\u205f",
  "\u3000"
]

describe("trimWhiteSpace", () => {
  it("property: equals the regex form of Rust's str::trim", () => {
    const unit = fc.oneof(fc.constantFrom(...whiteSpace, "\ufeff", "a", "\u200b", "😀"), fc.string({ maxLength: 2 }))
    fc.assert(
      fc.property(fc.array(unit, { maxLength: 12 }).map((parts) => parts.join("")), (s) => {
        assert.strictEqual(Entry.trimWhiteSpace(s), reference(s))
      }),
      { numRuns: A.runs(2000) }
    )
  })

  it("a long name with a long inner run of whitespace is validated in linear time", () => {
    const name = "a" + " ".repeat(1_000_000) + "a"
    const started = Date.now()
    const r = Entry.validateToolParams({ ...A.call("x"), tool_name: name })
    assert.isTrue(Result.isSuccess(r))
    assert.strictEqual(Entry.trimWhiteSpace(" " + name + "\u3000"), name)
    const trailing = Entry.validateToolParams({ ...A.call("x"), server_id: name + " " })
    assert.isTrue(Result.isFailure(trailing) && trailing.failure.field === "server_id")
    assert.isBelow(Date.now() - started, 2000)
  })
})
