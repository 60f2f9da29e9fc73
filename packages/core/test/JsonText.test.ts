import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { Entry } from "../src/index.ts"
import * as Arb from "./arbitraries.ts"

describe("Entry.toJsonText", () => {
  it("is JSON.stringify for values without -0, and keeps -0 where there is one", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        const text = Entry.toJsonText(value)
        assert.deepStrictEqual(JSON.parse(text), value)
        if (!text.includes("-0")) assert.strictEqual(text, JSON.stringify(value))
      }),
      { numRuns: Arb.runs(300) }
    )
  })

  it("writes -0 inside arrays and objects and reads it back", () => {
    const value = { a: [-0, 0, { b: -0 }], "": -0 }
    const back = JSON.parse(Entry.toJsonText(value))
    assert.isTrue(Object.is(back.a[0], -0))
    assert.isTrue(Object.is(back.a[1], 0))
    assert.isTrue(Object.is(back.a[2].b, -0))
    assert.isTrue(Object.is(back[""], -0))
    assert.strictEqual(Entry.toJsonText({ x: 1, y: [2, "z"] }), "{\"x\":1,\"y\":[2,\"z\"]}")
  })
})
