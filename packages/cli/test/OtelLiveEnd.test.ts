/**
 * A live export at a door's end (`otel/Live`, in process, over the filesystem
 * adapter in a temp dir, to a receiver that decodes with the OpenTelemetry JS
 * SDK's own definitions): a door that writes and ends at once, before its
 * follower read anything, still sends every span of what it wrote: the end lets
 * the follower read up to the door's last entry first, then sends. Before, the
 * scope interrupted the follower before the end could catch it up, and the spans
 * were lost without a word.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Persistence, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Live from "../src/otel/Live.ts"
import * as Spans from "../src/otel/Spans.ts"
import { listen, load } from "./otlpReceiver.ts"

const otlp = load()

const call = (i: number): Entry.ValidToolParams => ({
  tool_name: i % 2 === 0 ? "Bash" : "Read",
  server_id: "bench",
  agent_id: "main",
  bytes_read: i,
  bytes_written: 0,
  delegation_depth: 0,
  allowed: true
})

// A door over `root`: a journal writing through storage tapped by a live export made
// with `options`, `write` what it writes before it ends; what the export came to.
const liveDoor = <E>(
  root: string,
  options: Live.Options,
  write: (journal: SessionJournal.SessionJournal["Service"]) => Effect.Effect<void, E>
) =>
  Effect.gen(function*() {
    let live: Live.Live | undefined
    yield* Effect.scoped(Effect.gen(function*() {
      const storage = Context.get(yield* Layer.build(NodePersistence.layer({ root })), Persistence.Persistence)
      const reader = yield* Layer.build(
        SessionJournal.layer().pipe(Layer.provide(Layer.succeed(Persistence.Persistence, storage)))
      )
      live = yield* Live.make(options).pipe(Effect.provideContext(reader))
      const writer = yield* Layer.build(
        SessionJournal.layer().pipe(Layer.provide(Layer.succeed(Persistence.Persistence, live.tap(storage))))
      )
      yield* write(Context.get(writer, SessionJournal.SessionJournal))
    }))
    return live!.summary()
  })

// `n` calls in one session, the door ending right after the last one.
const door = (root: string, url: string, n: number, thread = true) =>
  liveDoor(root, {
    url,
    headers: {},
    protocol: "http/protobuf",
    requestTimeout: Duration.seconds(30),
    exitTimeout: Duration.minutes(5),
    note: () => Effect.void,
    thread
  }, (journal) =>
    Effect.gen(function*() {
      for (let i = 0; i < n; i++) yield* journal.record("door-end", call(i))
    }))

describe("live export at the door's end", () => {
  it.each([["on its own thread", true], ["on the door's thread", false]] as const)(
    "sends every span of what the door wrote, when the door ends before its follower read anything, the sender %s (failed before)",
    async (_, thread) => {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "sj-live-end-"))
      const receiver = await listen({ _tag: "accept" })
      try {
        const n = 40
        const summary = await Effect.runPromise(door(root, receiver.url, n, thread))
        // Each call (ended by the next entry, or by the end) and the session.
        assert.deepStrictEqual(
          { spans: summary.spans, delivered: summary.delivered, lost: summary.lost, dropped: summary.dropped },
          { spans: n + 1, delivered: n + 1, lost: 0, dropped: 0 },
          JSON.stringify(summary)
        )
        const spans = receiver.requests.flatMap((q) => otlp.decode(new Uint8Array(q.body)))
        assert.strictEqual(spans.length, n + 1)
        const session = spans.filter((s) => s.parentSpanId === null)
        assert.strictEqual(session.length, 1)
        assert.strictEqual(session[0]!.traceId, Spans.traceIdOf("door-end"))
        assert.strictEqual(spans.filter((s) => s.name.startsWith("execute_tool")).length, n)
      } finally {
        await receiver.close()
        fs.rmSync(root, { recursive: true, force: true })
      }
    },
    120_000
  )

  it(
    "a copy damaged where the follower reads: the loss is said and counted, also when the door ends first, and the door's writes are stored (failed before)",
    async () => {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "sj-live-damaged-"))
      const receiver = await listen({ _tag: "accept" })
      const notes: Array<string> = []
      try {
        // Ten calls, checkpointed, then entry 2 edited in place: a door that opens the
        // session loads it from the checkpoint and writes on; the follower reads it from
        // its first entry and meets the edit.
        await Effect.runPromise(
          Effect.gen(function*() {
            const j = yield* SessionJournal.SessionJournal
            for (let i = 0; i < 10; i++) yield* j.record("damaged", call(i))
            yield* j.close("damaged")
          }).pipe(
            Effect.provide(
              SessionJournal.layer({ checkpointMinBytes: 1 }).pipe(Layer.provide(NodePersistence.layer({ root })))
            )
          )
        )
        assert.isTrue(fs.existsSync(path.join(root, "damaged", "checkpoint.json")), "checkpointed")
        // The segment that holds entry 2 (a checkpoint starts a new segment).
        const segment = fs.readdirSync(path.join(root, "damaged")).filter((n) => n.endsWith(".jsonl"))
          .map((n) => path.join(root, "damaged", n))
          .find((f) => fs.readFileSync(f, "latin1").includes(`"sequence":2,`))!
        const text = fs.readFileSync(segment, "latin1")
        const at = text.indexOf(`"tool_name":"Bash"`, text.indexOf(`"sequence":2,`))
        assert.isAbove(at, text.indexOf(`"sequence":2,`))
        fs.writeFileSync(segment, text.slice(0, at) + `"tool_name":"Bush"` + text.slice(at + 18), "latin1")

        // The door, with the live export around it (as `--otlp` sets it up), bound at its end by `exitTimeout`.
        const doorOn = (exitTimeout: Duration.Duration, from: number) =>
          Effect.runPromise(
            Effect.gen(function*() {
              const storage = yield* NodePersistence.make({ root })
              yield* Live.around(storage, {
                url: receiver.url,
                headers: {},
                protocol: "http/protobuf",
                requestTimeout: Duration.seconds(30),
                exitTimeout,
                note: (line) => Effect.sync(() => notes.push(line))
              }, (tapped) =>
                Effect.gen(function*() {
                  const journal = yield* SessionJournal.make().pipe(
                    Effect.provideService(Persistence.Persistence, tapped)
                  )
                  for (let i = from; i < from + 3; i++) yield* journal.record("damaged", call(i))
                }))
            }).pipe(Effect.scoped)
          )

        // Given the time to read: said at once, then counted at the end; nothing sent.
        await doorOn(Duration.minutes(5), 10)
        assert.strictEqual(notes.length, 2, notes.join("\n"))
        assert.match(notes[0]!, /^spans of session damaged are not sent: /)
        assert.match(
          notes[1]!,
          /^0 of 0 spans were not delivered to .*, and 1 session was not exported: following session damaged failed: /
        )
        assert.strictEqual(receiver.requests.length, 0)

        // Ended before the follower gave up on the damage (it waits for storage to settle
        // for seconds): counted at the end all the same (before, nothing was said).
        notes.length = 0
        await doorOn(Duration.millis(300), 13)
        assert.strictEqual(notes.length, 1, notes.join("\n"))
        assert.match(notes[0]!, /, and 1 session was not exported: session damaged was not read to its end within /)
        assert.strictEqual(receiver.requests.length, 0)

        // The door's writes are stored after the checkpoint.
        const state = await Effect.runPromise(
          Effect.flatMap(SessionJournal.SessionJournal, (j) => j.state("damaged")).pipe(
            Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root }))))
          )
        )
        assert.strictEqual(state.next_sequence, 16)
      } finally {
        await receiver.close()
        fs.rmSync(root, { recursive: true, force: true })
      }
    },
    120_000
  )
})

describe("live export past its bound on sessions", () => {
  it(
    "more sessions at once than it follows: every session's spans are sent, or the session is counted and said; the door's end is not held up (failed before: a follower let go before it started stayed followed, the end waited its whole bound and sent nothing)",
    async () => {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "sj-live-many-"))
      const receiver = await listen({ _tag: "accept" })
      const notes: Array<string> = []
      const n = 24
      try {
        const summary = await Effect.runPromise(liveDoor(root, {
          url: `${receiver.url}/v1/traces`,
          headers: {},
          protocol: "http/protobuf",
          requestTimeout: Duration.seconds(30),
          maxSessions: 4,
          // Far past what the end needs: reached only when the end waits on nothing.
          exitTimeout: Duration.seconds(60),
          note: (line) => Effect.sync(() => notes.push(line))
        }, (journal) =>
          // One call in each of `n` sessions, written at once.
          Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) => journal.record(`many-${i}`, call(i)), {
            concurrency: "unbounded",
            discard: true
          })))
        const spans = receiver.requests.flatMap((q) => otlp.decode(new Uint8Array(q.body)))
        // Whatever was made was sent (the collector accepts, the end had its time).
        assert.strictEqual(summary.lost, 0, JSON.stringify(summary))
        assert.strictEqual(spans.length, summary.delivered)
        // Each session: its call's span sent, or the session counted as not exported.
        const sent = new Set(spans.filter((s) => s.name.startsWith("execute_tool")).map((s) => s.traceId))
        const counted = Array.from({ length: n }, (_, i) => `many-${i}`).filter((id) => !sent.has(Spans.traceIdOf(id)))
        assert.strictEqual(counted.length, summary.unread, JSON.stringify(summary))
        if (summary.unread > 0) assert.match(notes[0] ?? "", /^spans of session many-\d+ are not sent: /)
      } finally {
        await receiver.close()
        fs.rmSync(root, { recursive: true, force: true })
      }
    },
    180_000
  )
})
