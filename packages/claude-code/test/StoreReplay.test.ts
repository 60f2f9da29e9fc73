/**
 * The session store's idempotency against a model, on the in-memory adapter (so
 * that many runs are cheap): a transcript of entries with unique uuids and of
 * uuid-less lines drawn from a few texts (so equal uuid-less lines, also in a row,
 * are common) is appended in random batches, some retried at once as the SDK
 * retries, some split across a restart of the store; then replayed whole in
 * random batch sizes, as `importSessionToStore` replays (its first batch holds a
 * uuid), by the same store and by a fresh one. `load` is the transcript, once,
 * in order, after every step, and every tool call completed is one tool entry on
 * the chain, which verifies. Each run picks the budget of the store's uuid index,
 * down to none, so that uuids leave memory and are looked for in storage; some
 * uuids are longer than the index keeps as they are. The seed is in the test's name
 * (`SEED=…` replays).
 */
import { Persistence, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import { assert, describe, it } from "vitest"
import { JournalSessionStore } from "../src/index.ts"

const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))

type Entry = JournalSessionStore.SessionStoreEntry
const key = { projectKey: "-model", sessionId: "model-session" }

// A store over `persistence`, with its own journal service (a "process").
const withStore = <A>(
  persistence: Persistence.Persistence["Service"],
  f: (s: JournalSessionStore.Operations, j: SessionJournal.SessionJournal["Service"]) => Effect.Effect<A, unknown>,
  indexBytes?: number
) =>
  Effect.scoped(Effect.gen(function*() {
    return yield* f(yield* JournalSessionStore.Service, yield* SessionJournal.SessionJournal)
  })).pipe(
    Effect.provide(
      JournalSessionStore.layer({ indexBytes }).pipe(
        Layer.provideMerge(SessionJournal.layer()),
        Layer.provide(Layer.succeed(Persistence.Persistence, persistence))
      )
    )
  )

const texts = ["mode", "last-prompt", "cost-state"]

// Picks: -1 a user line with a uuid, -2 an assistant line calling a tool, -3 the
// result of the oldest call still open, -4 a user line with a uuid of 300
// characters, 0.. a uuid-less line of that text.
const transcriptArb = fc.array(
  fc.oneof(fc.constant(-1), fc.constant(-2), fc.constant(-3), fc.constant(-4), fc.nat(texts.length - 1)),
  {
    minLength: 1,
    maxLength: 40
  }
).map((picks) => {
  let n = 0
  let calls = 0
  const open: Array<string> = []
  // The first entry has a uuid, as a transcript's user prompt does before its first uuid-less line ends a batch.
  const entries = [-1, ...picks].map((p): Entry => {
    if (p === -1) return { type: "user", uuid: `u-${n++}`, n }
    if (p === -4) return { type: "user", uuid: `u-${n++}-${"x".repeat(300)}`, n }
    if (p === -2) {
      const id = `toolu_${calls++}`
      open.push(id)
      return {
        type: "assistant",
        uuid: `u-${n++}`,
        message: { content: [{ type: "tool_use", id, name: "Bash", input: { command: "echo" } }] }
      }
    }
    if (p === -3) {
      const id = open.shift()
      return id === undefined
        ? { type: "user", uuid: `u-${n++}`, n }
        : {
          type: "user",
          uuid: `u-${n++}`,
          message: { content: [{ type: "tool_result", tool_use_id: id, content: "ok" }] }
        }
    }
    return { type: texts[p]!, value: p }
  })
  return { entries, completed: calls - open.length }
})

const cuts = (length: number, sizes: ReadonlyArray<number>): Array<[number, number]> => {
  const out: Array<[number, number]> = []
  let at = 0
  let i = 0
  while (at < length) {
    const size = Math.max(1, sizes[i++ % sizes.length]!)
    out.push([at, Math.min(length, at + size)])
    at += size
  }
  return out
}

describe("JournalSessionStore against a model", () => {
  it(`live batches with retries and restarts, then replays in other batch sizes, store every entry once, in order (seed ${SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(
        transcriptArb,
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 50 }),
        fc.constantFrom(undefined, 0, 150, 400, 2000),
        async ({ completed, entries: transcript }, sizes, retries, restarts, replaySize, indexBytes) =>
          Effect.runPromise(Effect.gen(function*() {
            const persistence = yield* Persistence.makeMemory()
            const expectLoad = (s: JournalSessionStore.Operations, upTo: number) =>
              Effect.map(
                s.load(key),
                (got) =>
                  assert.deepStrictEqual(
                    got?.map((e) => JSON.stringify(e)),
                    transcript.slice(0, upTo).map((e) => JSON.stringify(e))
                  )
              )
            const batches = cuts(transcript.length, sizes)
            let b = 0
            while (b < batches.length) {
              // One "process": a run of batches until a restart.
              b = yield* withStore(persistence, (s) =>
                Effect.gen(function*() {
                  let i = b
                  for (; i < batches.length; i++) {
                    const [from, to] = batches[i]!
                    const batch = transcript.slice(from, to)
                    yield* s.append(key, batch)
                    // The SDK's retry of a batch that landed: only a batch with a uuid is
                    // known again (a retried batch of uuid-less lines alone is new lines).
                    if (retries[i % retries.length]! && batch.some((e) => e.uuid !== undefined)) {
                      yield* s.append(key, batch)
                    }
                    yield* expectLoad(s, to)
                    if (restarts[i % restarts.length]!) {
                      return i + 1
                    }
                  }
                  return i
                }), indexBytes)
            }
            const replay = (s: JournalSessionStore.Operations) =>
              Effect.gen(function*() {
                for (const [from, to] of cuts(transcript.length, [replaySize])) {
                  yield* s.append(key, transcript.slice(from, to))
                }
                yield* expectLoad(s, transcript.length)
              })
            // The same store replays after its own appends, and a fresh one twice.
            yield* withStore(
              persistence,
              (s) => Effect.andThen(s.append(key, transcript.slice(0, 1)), replay(s)),
              indexBytes
            )
            yield* withStore(persistence, (s, j) =>
              Effect.gen(function*() {
                yield* replay(s)
                yield* replay(s)
                // Every completed tool call is one tool entry, whatever the batches and retries.
                const stored = yield* Stream.runCollect(j.entries(JournalSessionStore.sessionId(key)))
                assert.strictEqual(stored.filter((e) => e.kind === "tool").length, completed)
                yield* j.verify(JournalSessionStore.sessionId(key))
              }), indexBytes)
          }))
      ),
      { seed: SEED, numRuns: process.env["STRESS"] === "1" ? 500 : 60 }
    )
  })
})
