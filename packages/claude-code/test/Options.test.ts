/**
 * The session's interval options are `Duration.Input`s, decoded before the CLI
 * is started: a value that is no duration, or a negative one, fails `make` with a
 * `StorageError` naming the option, never a defect where it is first used.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import { Persistence, SessionJournal } from "@session-journal/core"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Session } from "../src/index.ts"

const journal = Layer.mergeAll(
  SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory())),
  NodeServices.layer
)

describe("Session interval options", () => {
  it.effect("a bad interruptTimeout, killGrace, archive.interval, initializeTimeout or decisionTimeout fails make before the CLI starts", () =>
    Effect.gen(function*() {
      const bad: ReadonlyArray<readonly [string, Partial<Session.Options>]> = [
        ["interruptTimeout", { interruptTimeout: "soon" as Duration.Input }],
        ["killGrace", { killGrace: -1 }],
        ["archive.interval", { archive: { source: "/nonexistent", interval: Number.NaN } }],
        ["initializeTimeout", { initializeTimeout: "later" as Duration.Input }],
        ["decisionTimeout", { decisionTimeout: -5 }]
      ]
      for (const [option, over] of bad) {
        const error = yield* Effect.flip(
          Effect.scoped(Session.make({ journalSession: "cc-options", claude: "/nonexistent/claude", ...over }))
        )
        assert.deepStrictEqual(
          error._tag === "StorageError" && error.reason._tag === "InvalidOption"
            ? [error.operation, error.reason.option]
            : error.message,
          ["configure", option]
        )
      }
    }).pipe(Effect.provide(journal)))
})
