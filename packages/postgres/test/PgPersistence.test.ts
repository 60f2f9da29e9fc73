import { PgPersistence } from "../src/index.ts"
import * as Effect from "effect/Effect"
import { afterAll, describe } from "vitest"
import { suite } from "@session-journal/core/test/PersistenceContract"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("contract")

describe.skipIf(skipReason !== null)("postgres", () => {
  suite("postgres", PgPersistence.layerFromUrl(url, { tablePrefix: prefix, checkpointEvery: 7, pageSize: 16, pollInterval: "200 millis" }))

  afterAll(() =>
    Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer())))
  )
})
