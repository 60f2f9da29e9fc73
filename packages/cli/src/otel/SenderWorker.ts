/**
 * A `Sender` on a worker thread, for the doors' live export: encoding spans (Effect's
 * OTLP serialization) and talking to the collector happen on a thread of their own,
 * so the door's thread only hands finished spans over (one message per batch and
 * session). The worker runs this module (`url`), which starts a `Sender` there
 * (`Sender.make`) and answers each flush with what the collector accepted so far.
 *
 * The thread never holds the process open, and closing the scope ends it (flush
 * first). A worker that cannot start or stops is said as a problem: its flushes
 * complete, what it had not sent is lost and counted, never waited for.
 *
 * @since 0.1.0
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import type * as Sender from "./Sender.ts"
import type * as Spans from "./Spans.ts"

/**
 * What the worker is started with.
 *
 * @since 0.1.0
 */
export interface Start {
  readonly role: typeof ROLE
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly protocol: Sender.Protocol
  readonly requestTimeoutMillis: number
}

/**
 * A message to the worker: spans of a session, or a flush to answer.
 *
 * @since 0.1.0
 */
export type ToWorker =
  | { readonly _tag: "Send"; readonly session: string; readonly spans: ReadonlyArray<Spans.Finished> }
  | { readonly _tag: "Flush"; readonly id: number }

/**
 * A message from the worker: its sender is made (`Ready`), or a flush is answered.
 *
 * @since 0.1.0
 */
export type FromWorker = { readonly _tag: "Ready" } | Flushed

/**
 * The worker's answer to a flush: what the collector accepted so far, and the
 * first problems.
 *
 * @since 0.1.0
 */
export interface Flushed {
  readonly _tag: "Flushed"
  readonly id: number
  readonly delivered: number
  readonly problems: ReadonlyArray<string>
}

/**
 * The role the worker is started in (`workerData.role`).
 *
 * @since 0.1.0
 */
export const ROLE = "session-journal otel sender"

/**
 * This module's own URL: what the worker runs.
 *
 * @since 0.1.0
 */
export const url: string = import.meta.url

// On the worker: a sender, fed by the messages, each flush answered in order.
const serve = async (port: NonNullable<typeof parentPort>, start: Start) => {
  const [Effect, Duration, Queue, SenderModule] = await Promise.all([
    import("effect/Effect"),
    import("effect/Duration"),
    import("effect/Queue"),
    import("./Sender.ts")
  ])
  const program = Effect.gen(function*() {
    const sender = yield* SenderModule.make({
      url: start.url,
      headers: start.headers,
      protocol: start.protocol,
      requestTimeout: Duration.millis(start.requestTimeoutMillis)
    })
    const flushes = yield* Queue.unbounded<number>()
    port.on("message", (message: ToWorker) => {
      if (message._tag === "Send") sender.send(message.session, message.spans)
      else Queue.offerUnsafe(flushes, message.id)
    })
    const made: FromWorker = { _tag: "Ready" }
    port.postMessage(made)
    return yield* Queue.take(flushes).pipe(
      Effect.tap(() => sender.flush),
      Effect.tap((id) =>
        Effect.sync(() => {
          const answer: Flushed = { _tag: "Flushed", id, delivered: sender.delivered(), problems: sender.problems() }
          port.postMessage(answer)
        })
      ),
      Effect.forever
    )
  })
  await Effect.runPromise(Effect.scoped(program))
}

if (!isMainThread && parentPort !== null && (workerData as Start | undefined)?.role === ROLE) {
  void serve(parentPort, workerData as Start)
}

/**
 * Starts the worker (from the sources, it loads them as the tests do: Node strips
 * the types, the workspace's packages resolve to their sources).
 *
 * @since 0.1.0
 */
export const spawn = (start: Omit<Start, "role">): Worker => {
  const fromSources = url.endsWith(".ts")
  return new Worker(new URL(url), {
    workerData: { ...start, role: ROLE } satisfies Start,
    ...(fromSources ? { execArgv: [...process.execArgv, "--conditions=@session-journal/source"] } : {})
  })
}
