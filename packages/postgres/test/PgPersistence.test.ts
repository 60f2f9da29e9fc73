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
