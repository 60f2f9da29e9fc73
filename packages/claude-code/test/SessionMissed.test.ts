/**
 * A subscriber of the driver's events that falls more than `eventsCapacity` behind
 * is told how many lines it missed (`Missed`), wherever the sliding hub dropped
 * them: before the first line it gets, between two, and after the last one. Over a
 * stand-in CLI (`cat` of a file of lines), so no real CLI is needed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Session, SessionState } from "../src/index.ts"
import * as Harness from "./harness.ts"

const standIn = (lines: number): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-missed-"))
  const data = path.join(dir, "lines.jsonl")
  fs.writeFileSync(data, Array.from({ length: lines }, (_, i) => `{"type":"stand_in","i":${i}}\n`).join(""))
  const exe = path.join(dir, "claude")
  fs.writeFileSync(exe, `#!/bin/sh\nexec cat '${data}'\n`, { mode: 0o755 })
  return dir
}

describe("Session events", () => {
  it.live("a subscriber that pulls only after the session ended counts every line: the ones it got and the ones it missed", () =>
    Effect.gen(function*() {
      const dir = standIn(200)
      return yield* Effect.gen(function*() {
        const session = yield* Session.make({
          journalSession: "missed",
          claude: path.join(dir, "claude"),
          eventsCapacity: 4
        })
        const events = yield* session.subscribe
        // Nothing is pulled until the CLI is gone: the hub keeps the newest 4.
        yield* SubscriptionRef.changes(session.state).pipe(
          Stream.filter(SessionState.isDead),
          Stream.take(1),
          Stream.runDrain
        )
        const seen = yield* Stream.runCollect(events)
        const lines = seen.filter((e) => e._tag !== "Missed")
        const missed = seen.reduce((n, e) => n + (e._tag === "Missed" ? e.count : 0), 0)
        const journaled = (yield* Harness.entriesOf("missed")).filter((e) =>
          e.kind === Session.LINE_KIND || e.kind === Session.OVERSIZED_KIND
        )
        // Every line of the CLI's is counted; a line of the driver's (its
        // `initialize`) may have been published before the subscriber came.
        // Before, the lines dropped before the first one it got and after the last
        // were not counted (it saw 4 of 201).
        assert.isAtMost(lines.length, 4)
        assert.isAtLeast(lines.length + missed, 200)
        assert.isAtMost(lines.length + missed, journaled.length)
      }).pipe(Effect.scoped, Effect.provide(Harness.journalLayer(dir)))
    }).pipe(Effect.timeout("60 seconds")))
})
