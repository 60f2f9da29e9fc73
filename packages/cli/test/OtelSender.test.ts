/**
 * `Sender` against a receiver that is not ours (`otlpReceiver.ts`: the
 * OpenTelemetry JS SDK's protobuf decoder): the span data it builds from what a
 * fold gave is what OTLP's trace.proto can hold, in protobuf and in JSON, even
 * when an entry's numbers are as large as the journal accepts; a collector that
 * sends its status and never the rest of its answer is no answer, within the
 * bound on each request.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as Sender from "../src/otel/Sender.ts"
import * as Spans from "../src/otel/Spans.ts"
import { otherAt, toolAt } from "./hookEntries.ts"
import { listen, load } from "./otlpReceiver.ts"

const otlp = load()

// The largest time OTLP's fixed64 nanoseconds hold.
const MAX_FIXED64 = 2n ** 64n - 1n

const T0 = 1_764_400_000

// A hooked call whose outcome records the largest `duration_ms` the hooks accept
// (a safe integer: about 285,000 years past the call's start).
const longCall = (): ReadonlyArray<Spans.Finished> => {
  const at = (sequence: number, kind: string, payload: unknown) => otherAt(sequence, T0 + sequence, kind, payload)
  const tool = toolAt(0, T0)
  const fold = Spans.fold("s1", null)
  const assembler = Spans.assembler()
  const entries = [
    tool,
    at(1, "claude-code.decision", {
      tool_use_id: "toolu_a",
      tool_sequence: 0,
      verdict: "allow",
      guard: null,
      reason: null
    }),
    at(2, "tool.outcome", {
      tool_use_id: "toolu_a",
      bytes_read: 0,
      bytes_written: 0,
      error: null,
      duration_ms: Number.MAX_SAFE_INTEGER
    })
  ]
  return [...entries.flatMap((e) => assembler.apply(fold.add(e))), ...assembler.apply(fold.finish())]
}

const sendAll = (protocol: Sender.Protocol, spans: ReadonlyArray<Spans.Finished>, make = Sender.make) =>
  Effect.gen(function*() {
    const receiver = yield* Effect.acquireRelease(
      Effect.promise(() => listen({ _tag: "accept" })),
      (r) => Effect.promise(() => r.close())
    )
    const sender = yield* make({
      url: `${receiver.url}/v1/traces`,
      headers: {},
      protocol,
      requestTimeout: Duration.seconds(30)
    })
    sender.send("s1", spans)
    yield* sender.flush
    assert.strictEqual(sender.delivered(), spans.length, sender.problems().join("; "))
    return receiver.requests
  }).pipe(Effect.scoped)

describe("Sender", () => {
  it.live("a time past what fixed64 holds is sent as its largest, never wrapped (failed before: protobuf wrapped it modulo 2^64, JSON sent a value outside fixed64)", () =>
    Effect.gen(function*() {
      const spans = longCall()
      const call = spans.find((f) => f.key === "call:0")!
      assert.isTrue(call.end > MAX_FIXED64, "the fold's end is past fixed64")

      const [proto] = yield* sendAll("http/protobuf", spans)
      const decoded = otlp.decode(new Uint8Array(proto!.body))
      const sent = decoded.find((s) => s.name === "execute_tool Bash")!
      assert.strictEqual(sent.start, BigInt(T0) * 1_000_000_000n)
      assert.strictEqual(sent.end, MAX_FIXED64)

      const [json] = yield* sendAll("http/json", spans)
      const body = JSON.parse(json!.body.toString("utf8")) as {
        resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ name: string; endTimeUnixNano: string }> }> }>
      }
      const wire = body.resourceSpans[0]!.scopeSpans[0]!.spans.find((s) => s.name === "execute_tool Bash")!
      assert.strictEqual(wire.endTimeUnixNano, String(MAX_FIXED64))
    }))

  it.live(
    "a collector that answers its status and never the rest of its answer is no answer within the request's bound (failed before: the flush never ended)",
    () =>
      Effect.gen(function*() {
        const url = yield* Effect.acquireRelease(
          Effect.promise(() =>
            new Promise<{ url: string; server: http.Server }>((resolve) => {
              const server = http.createServer((req, res) => {
                req.resume()
                req.on("end", () => {
                  res.writeHead(200, { "content-type": "application/x-protobuf", "content-length": "10" })
                  res.write("abc") // and nothing more
                })
              })
              server.listen(
                0,
                "127.0.0.1",
                () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, server })
              )
            })
          ),
          ({ server }) =>
            Effect.promise(() =>
              new Promise<void>((done) => {
                server.closeAllConnections()
                server.close(() => done())
              })
            )
        )
        const sender = yield* Sender.make({
          url: url.url,
          headers: {},
          protocol: "http/protobuf",
          requestTimeout: Duration.millis(200)
        })
        sender.send("s1", longCall())
        // Far past the request's bound: the flush ends by the bound, not by this.
        const ended = yield* sender.flush.pipe(Effect.timeoutOption(Duration.seconds(30)))
        assert.isTrue(Option.isSome(ended), "the flush ended")
        assert.strictEqual(sender.delivered(), 0)
        assert.include(sender.problems().join("; "), "no answer within")
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "on a thread of its own (the doors' live export): the same requests, byte for byte, as on the caller's",
    () =>
      Effect.gen(function*() {
        for (const protocol of ["http/protobuf", "http/json"] as const) {
          const here = yield* sendAll(protocol, longCall())
          const threaded = yield* sendAll(protocol, longCall(), Sender.inWorker)
          assert.strictEqual(threaded.length, here.length)
          assert.deepStrictEqual(threaded.map((r) => r.body), here.map((r) => r.body), protocol)
        }
      }),
    60_000
  )

  it.live(
    "a collector the thread cannot reach is a problem: flushes complete, nothing is counted delivered",
    () =>
      Effect.gen(function*() {
        const sender = yield* Sender.inWorker({
          url: "not a URL",
          headers: {},
          protocol: "http/protobuf",
          requestTimeout: Duration.seconds(1)
        })
        sender.send("s1", longCall())
        const ended = yield* sender.flush.pipe(Effect.timeoutOption(Duration.seconds(30)))
        assert.isTrue(Option.isSome(ended), "the flush ended")
        yield* sender.ready
        assert.strictEqual(sender.delivered(), 0)
        assert.isAbove(sender.problems().length, 0)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a thread that dies (a defect on it) is a problem: pending and later flushes complete at once",
    () =>
      Effect.gen(function*() {
        const receiver = yield* Effect.acquireRelease(
          Effect.promise(() => listen({ _tag: "accept" })),
          (r) => Effect.promise(() => r.close())
        )
        const sender = yield* Sender.inWorker({
          url: `${receiver.url}/v1/traces`,
          headers: {},
          protocol: "http/protobuf",
          requestTimeout: Duration.seconds(5)
        })
        yield* sender.ready
        // Span data the thread cannot encode: its handler throws, and the thread ends.
        const [good] = longCall()
        sender.send("s1", [{ ...good!, attributes: null as never }])
        const ended = yield* sender.flush.pipe(Effect.timeoutOption(Duration.seconds(30)))
        assert.isTrue(Option.isSome(ended), "the flush ended")
        assert.match(sender.problems().join("; "), /the sender's thread (failed|stopped)/)
        sender.send("s1", longCall())
        assert.isTrue(Option.isSome(yield* sender.flush.pipe(Effect.timeoutOption(Duration.seconds(5)))))
        assert.strictEqual(sender.delivered(), 0)
      }).pipe(Effect.scoped),
    60_000
  )
})
