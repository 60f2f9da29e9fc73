import { assert, describe, it } from "@effect/vitest"
import { Sha256 } from "@session-journal/core"
import { NodeSha256 } from "@session-journal/node"
import * as Effect from "effect/Effect"

describe("NodeSha256", () => {
  it("reproduces @noble/hashes on every probe and on random inputs", () => {
    assert.isUndefined(Sha256.check("node:crypto", NodeSha256.digest))
    for (let n = 0; n < 2000; n += 7) {
      const bytes = new Uint8Array(n).map((_, i) => (i * 131 + n * 7) & 0xff)
      assert.strictEqual(NodeSha256.digest(bytes), Sha256.noble(bytes))
    }
  })

  it.effect("is installed while its layer is alive", () =>
    Effect.gen(function*() {
      const inside = yield* Effect.sync(() => Sha256.implementation()).pipe(Effect.provide(NodeSha256.layer))
      assert.strictEqual(inside, "node:crypto")
      assert.strictEqual(Sha256.implementation(), "@noble/hashes")
    }))
})
