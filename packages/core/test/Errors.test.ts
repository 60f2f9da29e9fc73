/**
 * The shared helpers of the typed errors.
 */
import { assert, describe, it } from "@effect/vitest"
import { messageOf } from "../src/index.ts"

describe("messageOf", () => {
  it("is an Error's message, and any other thrown value as a string", () => {
    assert.strictEqual(messageOf(new TypeError("bad")), "bad")
    assert.strictEqual(messageOf("plain"), "plain")
    assert.strictEqual(messageOf(42), "42")
    assert.strictEqual(messageOf(undefined), "undefined")
  })
})
