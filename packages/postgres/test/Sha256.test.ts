/**
 * The adapter's layers install `node:crypto`'s SHA-256 for the chain while they are
 * alive, as the filesystem adapter's does; `@noble/hashes` comes back after.
 */
import { assert, describe, it } from "@effect/vitest"
import { Persistence, Sha256 } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("sha")

describe.skipIf(skipReason !== null)("postgres: the chain's SHA-256", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live("layerFromUrl installs node:crypto while it is alive", () =>
    Effect.gen(function*() {
      assert.strictEqual(Sha256.implementation(), "@noble/hashes")
      const inside = yield* Effect.gen(function*() {
        yield* Persistence.Persistence
        return Sha256.implementation()
      }).pipe(
        Effect.provide(
          Layer.fresh(PgPersistence.layerFromUrl(url, { tablePrefix: prefix, applicationName: "sj-test-sha" }))
        )
      )
      assert.strictEqual(inside, "node:crypto")
      assert.strictEqual(Sha256.implementation(), "@noble/hashes")
    }))
})
