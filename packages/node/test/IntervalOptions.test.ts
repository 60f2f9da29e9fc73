/**
 * The adapter's interval options are `Duration.Input`s: a value that is no
 * duration, or a negative one, fails the layer with a `StorageError` naming the
 * option (not a defect, and not silently read as zero).
 */
import { Persistence } from "@session-journal/core"
import type * as Duration from "effect/Duration"
import * as Exit from "effect/Exit"
import * as fs from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import type { NodePersistence } from "../src/index.ts"
import { runExit, tempDir } from "./helpers.ts"

const root = tempDir("intervals")
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

const listed = Persistence.Persistence.use((p) => p.list)

describe("NodePersistence interval options", () => {
  it("a bad pollInterval, pollMillis or lockWait is a StorageError naming the option", async () => {
    const bad: ReadonlyArray<Partial<NodePersistence.Options>> = [
      { pollInterval: "soon" as Duration.Input },
      { pollInterval: -1 },
      { pollMillis: Number.NaN },
      { lockWait: "a while" as Duration.Input },
      { lockWait: Number.NaN },
      { lockWait: -5 }
    ]
    for (const options of bad) {
      const exit = await runExit({ root, ...options }, listed)
      const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
      const found = error?._tag === "Some" && error.value._tag === "StorageError"
        ? [error.value.operation, error.value.reason._tag === "InvalidOption" ? error.value.reason.option : "?"]
        : String(exit)
      expect(found, JSON.stringify(options)).toEqual(["configure", Object.keys(options)[0]])
    }
  })

  it("durations in any unit are taken, and the deprecated pollMillis still is", async () => {
    for (const options of [{ pollInterval: "10 millis", lockWait: "1 second" }, { pollMillis: 20 }] as const) {
      const exit = await runExit({ root, ...options }, listed)
      expect(Exit.isSuccess(exit), JSON.stringify(options)).toBe(true)
    }
  })
})
