/**
 * `otel.live`: what sending spans live costs a door that writes. Records per
 * second through `SessionJournal.record` on the filesystem adapter, one caller,
 * with a live export beside it (`otel/Live`, as `--otlp` sets it up: the storage
 * tapped, a follower reading the session back from storage and folding it into
 * spans, one sender posting them to a collector on 127.0.0.1 that accepts
 * everything), against the same journal without it, in the same rounds, each
 * side on a new session. The goal, ≥ 0.9, is the promise that exporting is off
 * the write path; the follower and the sender still share the process's one
 * core with the writer. Only the records are timed, not the export's end; the
 * note says how many spans reached the collector. `otel.live.json`: the same with
 * the spans in OTLP/JSON, in the same rounds (reported, no goal). `otel.live.stall`:
 * the 99th percentile of the door's event loop delay while it wrote, with the
 * sender on its own thread (the default) against the same with the sender on the
 * door's thread (`thread: false`), a fourth side in the same rounds (reported).
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import * as Live from "../../packages/cli/src/otel/Live.ts"
import type * as Sender from "../../packages/cli/src/otel/Sender.ts"
import { Persistence, SessionJournal } from "../../packages/core/src/index.ts"
import { type FsLayer, loadNode } from "../lib/adapters.ts"
import { recordSequential, withTempDir } from "../lib/env.ts"
import {
  type Figure,
  fmt,
  interleaveMany,
  median,
  notRun,
  rate,
  type RunOptions,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"

const NAME = "otel.live"
const JSON_NAME = "otel.live.json"
const STALL_NAME = "otel.live.stall"
const BASELINE = "the same records without live export"
const GOAL = { op: ">=", target: 0.9 } as const

// A collector that answers every request 200 with an empty body, counting them.
const collector = (): Promise<{ readonly url: string; readonly requests: () => number; readonly close: () => void }> =>
  new Promise((resolve) => {
    let requests = 0
    const server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        requests++
        res.writeHead(200, { "content-type": "application/x-protobuf", "content-length": "0" }).end()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        url: `http://127.0.0.1:${port}/v1/traces`,
        requests: () => requests,
        close: () => server.close()
      })
    })
  })

// `n` records on a new session under `root`, with a live export when `url` is given:
// the time of the records, and what the export came to once its scope closed.
const side = (
  layer: FsLayer,
  root: string,
  n: number,
  url: string | null,
  protocol: Sender.Protocol,
  thread = true
) =>
  Effect.gen(function*() {
    let live: Live.Live | null = null
    // How long the door's thread was held at once while it wrote (its event loop's delay, p99).
    const delay = monitorEventLoopDelay({ resolution: 1 })
    const ms = yield* Effect.scoped(Effect.gen(function*() {
      const storage = Context.get(yield* Layer.build(layer(root)), Persistence.Persistence)
      let written = storage
      if (url !== null) {
        const reader = yield* Layer.build(
          SessionJournal.layer().pipe(Layer.provide(Layer.succeed(Persistence.Persistence, storage)))
        )
        const made = yield* Live.make({
          url,
          headers: {},
          protocol,
          requestTimeout: Duration.seconds(10),
          exitTimeout: Duration.seconds(60),
          note: () => Effect.void,
          thread
        }).pipe(Effect.provideContext(reader))
        live = made
        written = made.tap(storage)
        // The steady state: the sender's thread started before the records are timed.
        yield* made.ready
      }
      const writer = yield* Layer.build(
        SessionJournal.layer().pipe(Layer.provide(Layer.succeed(Persistence.Persistence, written)))
      )
      delay.enable()
      const timed = yield* recordSequential(Context.get(writer, SessionJournal.SessionJournal), "bench-otel", n)
      delay.disable()
      return timed
    }))
    const summary = live === null ? null : (live as Live.Live).summary()
    return { ms, summary, stallMs: delay.percentile(99) / 1e6 }
  })

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const node = await loadNode()
  if (!node.ok) return [notRun(NAME, "records/s", BASELINE, GOAL, node.why)]
  const n = options.quick ? 200 : 1500
  const rounds = options.quick ? 3 : 7
  const sink = await collector()
  try {
    return await withTempDir("otel-live", async (dir) => {
      let spans = 0
      let delivered = 0
      // Per side, each round's 99th percentile of the door's event loop delay (ms).
      const stalls: Record<string, Array<number>> = { protobuf: [], inline: [] }
      const live = (protocol: Sender.Protocol, thread = true) => async (round: number) => {
        const root = path.join(dir, `${protocol.slice(5)}-${thread ? "thread" : "inline"}-${round}`)
        const r = await Effect.runPromise(side(node.value, root, n, sink.url, protocol, thread))
        if (protocol === "http/protobuf") stalls[thread ? "protobuf" : "inline"]!.push(r.stallMs)
        if (thread) {
          spans += r.summary?.spans ?? 0
          delivered += r.summary?.delivered ?? 0
        }
        return { ops: n, ms: r.ms }
      }
      const samples = await interleaveMany(rounds, [
        { name: "protobuf", run: live("http/protobuf") },
        { name: "json", run: live("http/json") },
        { name: "inline", run: live("http/protobuf", false) },
        {
          name: "plain",
          run: async (round) => {
            const r = await Effect.runPromise(side(node.value, path.join(dir, `plain-${round}`), n, null, "http/json"))
            return { ops: n, ms: r.ms }
          }
        }
      ], { log: options.log, label: NAME })
      const sizes = `${rounds} rounds × ${n.toLocaleString("en-US")} records, one session per side and round`
      return [
        throughputFigure(
          NAME,
          "records/s",
          BASELINE,
          { subject: samples["protobuf"]!, baseline: samples["plain"]! },
          GOAL,
          `${sizes}, spans in OTLP's protobuf (the default); ${delivered.toLocaleString("en-US")} of ` +
            `${spans.toLocaleString("en-US")} spans of both live sides delivered in ` +
            `${sink.requests().toLocaleString("en-US")} requests`
        ),
        throughputFigure(
          JSON_NAME,
          "records/s",
          BASELINE,
          { subject: samples["json"]!, baseline: samples["plain"]! },
          null,
          `${sizes}, spans in OTLP/JSON (\`--protocol http/json\`)`
        ),
        {
          name: STALL_NAME,
          value: median(stalls["protobuf"]!),
          unit: "ms",
          baseline: "the same with the sender on the door's thread",
          baseline_value: median(stalls["inline"]!),
          ratio: median(stalls["protobuf"]!.map((x, i) => x / stalls["inline"]![i]!)),
          goal: null,
          met: null,
          note: `${sizes}: the 99th percentile of the door's event loop delay while it wrote ` +
            `(monitorEventLoopDelay, 1 ms resolution; a record's synchronous durable write holds the loop too), ` +
            `median over rounds; the same side with the sender on the door's thread wrote ` +
            `${fmt(median(samples["inline"]!.map(rate)))} records/s`
        }
      ]
    })
  } finally {
    sink.close()
  }
}

/** The scenario. */
export const otelLive: Scenario = { name: NAME, figures: [NAME, JSON_NAME, STALL_NAME], run }
