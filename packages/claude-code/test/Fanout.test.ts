/**
 * The events fan-out under a slow subscriber: 10,000 lines from a process that
 * writes them as fast as it can (a stand-in for the CLI: the fan-out, not the
 * protocol, is under test here), a subscriber that reads one event and then sleeps
 * until the stream has ended. The stream slides (the subscriber gets the newest,
 * at most the capacity), the `Missed` counts plus the events received add up to
 * every line, the fold's counters are exact and the journal holds every line.
 * And an interrupt the process never answers still settles: after
 * `interruptTimeout` the process is ended and the outcome is `Closed`.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import { Entry, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { Session } from "../src/index.ts"
import * as Cli from "./claudeCli.ts"

afterAll(() => Cli.cleanup())

const N = process.env["STRESS"] ? 100_000 : 10_000

describe("Session events", () => {
  it.live(`a slow subscriber over ${N} events: sliding, missed counts right, the fold exact`, () =>
    Effect.gen(function*() {
      const root = Cli.tempDir("sj-fanout-")
      const script = path.join(root, "emit.js")
      fs.writeFileSync(
        script,
        `const n = ${N}; let out = "";
for (let i = 0; i < n; i++) out += JSON.stringify({ type: "system", subtype: "notification", n: i }) + "\\n";
out += JSON.stringify({ type: "result", subtype: "success", is_error: false, total_cost_usd: 0.5, usage: { input_tokens: 7 } }) + "\\n";
// Answers initialize; writes the lines when the prompt comes, then exits.
require("node:readline").createInterface({ input: process.stdin }).on("line", (l) => {
  const m = JSON.parse(l);
  if (m.type === "control_request") process.stdout.write(JSON.stringify({ type: "control_response", response: { subtype: "success", request_id: m.request_id, response: {} } }) + "\\n");
  else process.stdout.write(out, () => process.exit(0));
});`
      )
      const exe = path.join(root, "fake-claude")
      fs.writeFileSync(exe, `#!/bin/sh\nexec '${process.execPath}' '${script}'\n`, { mode: 0o755 })
      const capacity = 16
      const program = Effect.gen(function*() {
        const session = yield* Session.make({ journalSession: "fanout", claude: exe, eventsCapacity: capacity })
        const events = yield* session.subscribe
        yield* session.send({ text: "go" })
        let first = true
        const received = yield* events.pipe(
          // After the first event, wait until the CLI is gone: everything else queues or slides.
          Stream.tap(() => (first ? Effect.andThen(Effect.sync(() => (first = false)), session.ended) : Effect.void)),
          Stream.runCollect
        )
        const messages = received.filter((e) => e._tag === "Message")
        const missed = received.reduce((n, e) => n + (e._tag === "Missed" ? e.count : 0), 0)
        // Lines: 0 initialize, 1 its answer (before or after the subscription),
        // 2 the prompt, then the stand-in's N + 1; none is lost unreported.
        assert.strictEqual(messages.length + missed, N + 4 - messages[0]!.index)
        assert.strictEqual(messages.at(-1)!.index, N + 3)
        // At most: the answer to initialize when it came after the subscription, the
        // first event, and a full buffer.
        assert.isAtMost(messages.length, capacity + 2)
        assert.isAtLeast(missed, N + 1 - capacity - 2)
        assert.strictEqual(messages.at(-1)?.message._tag, "Result")
        const state = yield* SubscriptionRef.get(session.state)
        // The answer to initialize, then the lines.
        assert.strictEqual(state.messagesSeen, N + 2)
        assert.strictEqual(state.notificationsSeen, N)
        assert.strictEqual(state.resultsSeen, 1)
        assert.strictEqual(state.usage.input_tokens, 7)
        const journal = yield* SessionJournal.SessionJournal
        const entries = yield* Stream.runCollect(journal.entries("fanout"))
        const lines = entries.filter((e) => !Entry.isTool(e) && e.kind === Session.LINE_KIND)
        // initialize, its answer, the prompt, the lines.
        assert.strictEqual(lines.length, N + 4)
      })
      yield* program.pipe(
        Effect.scoped,
        Effect.provide(Layer.mergeAll(
          SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: path.join(root, "journal") }))),
          NodeServices.layer
        ))
      )
    }).pipe(Effect.timeout("60 seconds")))

  it.live("an interrupt never answered settles as Closed after the timeout, and the process is ended", () =>
    Effect.gen(function*() {
      const root = Cli.tempDir("sj-mute-")
      const exe = path.join(root, "mute-claude")
      // Answers initialize only; ignores SIGTERM, so the end needs SIGKILL.
      const script = path.join(root, "mute.js")
      fs.writeFileSync(
        script,
        `process.on("SIGTERM", () => {});
require("node:readline").createInterface({ input: process.stdin }).on("line", (l) => {
  const m = JSON.parse(l);
  if (m.request.subtype === "initialize") process.stdout.write(JSON.stringify({ type: "control_response", response: { subtype: "success", request_id: m.request_id, response: {} } }) + "\\n");
});`
      )
      fs.writeFileSync(exe, `#!/bin/sh\nexec '${process.execPath}' '${script}'\n`, { mode: 0o755 })
      const program = Effect.gen(function*() {
        const session = yield* Session.make({
          journalSession: "mute",
          claude: exe,
          interruptTimeout: "500 millis",
          killGrace: "300 millis"
        })
        const outcome = yield* session.interrupt
        assert.deepStrictEqual(outcome, { _tag: "Closed" })
        const error = yield* session.ended
        assert.strictEqual(error._tag, "CliDied")
        assert.isTrue(error._tag === "CliDied" && error.signal === "SIGKILL", String(error))
      })
      yield* program.pipe(
        Effect.scoped,
        Effect.provide(Layer.mergeAll(
          SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: path.join(root, "journal") }))),
          NodeServices.layer
        ))
      )
    }).pipe(Effect.timeout("30 seconds")))
})
