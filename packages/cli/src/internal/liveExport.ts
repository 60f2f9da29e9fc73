/**
 * A door with `--otlp`: its storage tapped by a live export (`otel/Live`), loaded
 * only when a collector is given. Two forms: a door that takes its storage as a
 * layer (the resident guard), and a door that writes through the journal in its
 * context (the driver, the MCP gateway), which then writes through a journal over
 * the tapped storage.
 */
import { Persistence, SessionJournal, type StorageError } from "@session-journal/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { InvalidInput } from "../Failure.ts"
import type * as Live from "../otel/Live.ts"
import type * as Sender from "../otel/Sender.ts"
import * as Output from "../Output.ts"
import * as OtlpFlags from "./otlpFlags.ts"

const load = Effect.promise((): Promise<typeof Live> => import("../otel/Live.ts"))

const optionsOf = (sending: Sender.Options): Live.Options => ({
  ...sending,
  note: (line) => Output.errorLine(`session-journal: ${line}`)
})

/** `door` given `storage`, tapped when `sending` names a collector. */
export const withStorage = <A, E, R, SE>(
  sending: Option.Option<Sender.Options>,
  storage: Layer.Layer<Persistence.Persistence, SE>,
  door: (storage: Layer.Layer<Persistence.Persistence, SE>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | SE | StorageError, R> =>
  Option.isNone(sending) ? door(storage) : Effect.scoped(Effect.gen(function*() {
    const live = yield* load
    const context = yield* Layer.build(storage)
    const persistence = Context.get(context, Persistence.Persistence)
    return yield* live.around(
      persistence,
      optionsOf(sending.value),
      (tapped) => door(Layer.succeed(Persistence.Persistence, tapped))
    )
  }))

/** `door`, its journal writing through tapped storage when `sending` names a collector. */
export const withJournal = <A, E, R>(
  sending: Option.Option<Sender.Options>,
  door: Effect.Effect<A, E, R>
): Effect.Effect<A, E | StorageError, R | Persistence.Persistence> =>
  Option.isNone(sending) ? door : Effect.gen(function*() {
    const live = yield* load
    const persistence = yield* Persistence.Persistence
    return yield* live.around(persistence, optionsOf(sending.value), (tapped) =>
      door.pipe(
        Effect.provide(
          SessionJournal.layer().pipe(Layer.provideMerge(Layer.succeed(Persistence.Persistence, tapped)))
        )
      ))
  })

/**
 * `withJournal` for a door's `--otlp` flag as parsed (`OtlpFlags.otlpFlag`): the
 * endpoint resolved (a bad one is `InvalidInput`), then the door, pipeable.
 */
export const journaled = (endpoint: Option.Option<OtlpFlags.Endpoint>) =>
<A, E, R>(
  door: Effect.Effect<A, E, R>
): Effect.Effect<A, E | StorageError | InvalidInput, R | Persistence.Persistence> =>
  Effect.flatMap(OtlpFlags.resolve({ field: "--otlp", endpoint }), (sending) => withJournal(sending, door))
