import type { StorageError } from "@session-journal/core"
import { suite } from "@session-journal/core/test/PersistenceContract"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { afterAll, describe, expect, it } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("contract")

describe.skipIf(skipReason !== null)("postgres", () => {
  suite("postgres", PgPersistence.layerFromUrl(url, { tablePrefix: prefix, pageSize: 16, pollInterval: "200 millis" }))

  it("invalid options fail the layer with a typed StorageError, not a defect", async () => {
    const bad: ReadonlyArray<PgPersistence.Options> = [
      { pollInterval: "soon" as Duration.Input },
      { conflictHold: "a while" as Duration.Input },
      { pollInterval: -1 },
      { followReconnect: Number.NaN },
      { pageSize: Number.NaN },
      { pageSize: 1.5 },
      { tablePrefix: "Not-A-Prefix" }
    ]
    for (const options of bad) {
      const exit = await Effect.runPromiseExit(
        Effect.scoped(Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix, ...options })))
      )
      expect(Exit.isFailure(exit), JSON.stringify(options)).toBe(true)
      const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
      expect(error?._tag === "Some" ? [error.value._tag, error.value.operation] : String(exit)).toEqual([
        "StorageError",
        "configure"
      ])
      // The option is named by the reason's case, not left to the message text.
      const reason = error?._tag === "Some" && error.value._tag === "StorageError" ? error.value.reason : undefined
      expect(reason?._tag === "InvalidOption" ? reason.option : reason?._tag).toBe(Object.keys(options)[0])
    }
  })

  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))
})

describe("PgPersistence.isTablePrefix", () => {
  it("takes lowercase letters, digits and _ up to 40 characters, not starting with a digit", () => {
    for (const ok of ["session_journal_", "_", "a", "a1_", "x".repeat(40)]) {
      expect(PgPersistence.isTablePrefix(ok), ok).toBe(true)
    }
    for (const bad of ["", "1a", "A", "a-b", "a b", "x".repeat(41), "é"]) {
      expect(PgPersistence.isTablePrefix(bad), bad).toBe(false)
    }
  })

  it.skipIf(skipReason !== null)("a refused prefix names the rule, whichever operation refuses it", async () => {
    const exit = await Effect.runPromiseExit(
      PgPersistence.dropTables("Not-A-Prefix").pipe(Effect.provide(adminLayer()))
    )
    const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
    const reason = error?._tag === "Some" ? (error.value as StorageError).reason : undefined
    expect(reason?._tag === "InvalidOption" ? [reason.option, reason.message] : String(exit)).toEqual([
      "tablePrefix",
      `invalid table prefix "Not-A-Prefix": ${PgPersistence.TABLE_PREFIX_RULE}`
    ])
  })
})
