/**
 * Live export for the long-lived doors (the resident guard, the stream-json
 * driver, the MCP gateway): the spans of what a door commits, sent to an
 * OpenTelemetry collector as it commits it, in the span model of `otel export`
 * (`Spans.fold`, `Spans.assembler`, `Sender`) and with the same ids, so a later
 * `otel export` of the session sends the same spans again, not a second copy.
 *
 * Off the write path. The door's storage is tapped (`tap`): once an append is
 * stored, the session it went to is noted (a map lookup, never a wait, never a
 * failure). Everything else happens in fibers of its own: a follower per noted
 * session reads the session from storage with `SessionJournal.follow` (every
 * entry checked as `follow` checks it) from its first entry, so its spans nest and
 * are named as `otel export` makes them; spans a follower completes go into a
 * bounded buffer (`maxBuffered`; past it spans are dropped and counted, never
 * waited for), and one sender fiber hands what the buffer holds to the sender's
 * own thread (`Sender.inWorker`: encoding and requests are off the door's thread)
 * and awaits the collector's answer (each request bounded) before it sends more.
 * A collector that is down or slow holds up only that fiber: decisions, answers, exit codes
 * and entries are what they are without it.
 *
 * What is sent: a span when it ends (a call at its outcome or denial, a
 * sub-agent at its stop), if the entry that ended it was stored after the door
 * began writing the session (spans that ended before were for an earlier writer
 * to send, or for `otel export`). The session's span, and the calls still open,
 * when the door lets the session go: Claude Code's `SessionEnd`, no new entry
 * for `idle`, more than `maxSessions` sessions followed (the one idle longest
 * of those that read what the door wrote goes; if none has, the one idle longest,
 * and that session is counted as not exported), or the door's end (the followers
 * first read up to what the door wrote, then one last flush, all within
 * `exitTimeout`). A session written again later
 * is followed again, its session span sent again with the same id and a later
 * end. A follower that joins a session with history reads that history once
 * (to rebuild the fold), which costs a read of the session, off the write path.
 *
 * Loss is said once: a line (`note`) the first time spans do not reach the
 * collector, and a count at the end (`Summary`).
 *
 * @since 0.1.0
 */
import { type Entry, Persistence, SessionJournal, type StorageError } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Sender from "./Sender.ts"
import * as Spans from "./Spans.ts"

/**
 * The kind of Claude Code's `SessionEnd` entry: the session's span is sent then.
 *
 * @since 0.1.0
 */
export const SESSION_END_KIND = "claude-code.SessionEnd"

/**
 * Spans sent per request at most.
 *
 * @since 0.1.0
 */
export const BATCH_SPANS = 512

/**
 * Where, how, and within what bounds.
 *
 * @since 0.1.0
 */
export interface Options extends Sender.Options {
  /** Spans waiting to be sent at most (default 4096); past it spans are dropped and counted. */
  readonly maxBuffered?: number | undefined
  /**
   * Sessions followed at once at most (default 32); past it the one idle longest is let
   * go (one that has read what the door wrote first; a session let go unread is counted).
   */
  readonly maxSessions?: number | undefined
  /** A session with no new entry for this long is let go (default 10 minutes). */
  readonly idle?: Duration.Duration | undefined
  /** The bound on what the door's end waits for: catching up and the last flush (default 2 s). */
  readonly exitTimeout?: Duration.Duration | undefined
  /** Says the loss, once (a line on stderr). */
  readonly note: (line: string) => Effect.Effect<void>
  /**
   * Whether encoding and requests run on a thread of their own (default true);
   * false runs them on the caller's thread, between its own work.
   */
  readonly thread?: boolean | undefined
}

/**
 * What a live export came to, at the door's end: spans completed, those the
 * collector accepted, those dropped from a full buffer, and why spans were lost.
 *
 * @since 0.1.0
 */
export interface Summary {
  readonly url: string
  readonly spans: number
  readonly delivered: number
  readonly dropped: number
  readonly lost: number
  /** Sessions whose spans could not all be made: their follower failed, or had not read what the door wrote by its end. */
  readonly unread: number
  readonly problems: ReadonlyArray<string>
}

/**
 * A live export: `tap` the door's storage with it; `summary` says what it came
 * to so far (at the end of its scope, all of it).
 *
 * @since 0.1.0
 */
export interface Live {
  readonly tap: (persistence: Persistence.Persistence["Service"]) => Persistence.Persistence["Service"]
  readonly summary: () => Summary
  /**
   * Completes once the sender's thread has started (or failed to): a door does
   * not wait for it (spans wait in the buffer meanwhile); a measurement of the
   * steady state does.
   */
  readonly ready: Effect.Effect<void>
}

interface Followed {
  readonly id: string
  /** The first sequence the door wrote: spans ended by earlier entries are not sent. */
  readonly from: number
  /** The last sequence the door wrote. */
  written: number
  /** The next sequence the follower will read. */
  next: number
  lastActive: number
  fiber: Fiber.Fiber<void> | null
}

const MAX_PROBLEMS = 5

/**
 * Starts a live export for as long as the scope lasts; the journal in context is
 * the one the followers read (over the door's storage). Closing the scope lets
 * every session go and sends what is left, within `exitTimeout`.
 *
 * @since 0.1.0
 */
export const make = (options: Options): Effect.Effect<Live, never, SessionJournal.SessionJournal | Scope.Scope> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const scope = yield* Scope.Scope
    const clock = yield* Clock.Clock
    const maxSessions = Math.max(1, options.maxSessions ?? 32)
    const idleMillis = Duration.toMillis(options.idle ?? Duration.minutes(10))
    const exitTimeout = options.exitTimeout ?? Duration.seconds(2)
    // Encoding and requests on a thread of their own (`Sender.inWorker`).
    const sender = yield* (options.thread === false ? Sender.make(options) : Sender.inWorker(options))
    // The followers' own scope. Made before the door's end is added below, it closes after
    // it: the end first lets the followers read up to what the door wrote, and only then
    // are they interrupted (forked into `scope` itself, the scope would interrupt them first).
    const followers = yield* Scope.fork(scope, "parallel")
    // Ended at the door's end: the sender then sends what is left and stops.
    const buffer = yield* Queue.dropping<{ readonly session: string; readonly span: Spans.Finished }, Cause.Done>(
      Math.max(1, options.maxBuffered ?? 4096)
    )
    // Sessions noted and not followed yet; the wake-up carries nothing.
    const noted = new Map<string, { from: number; written: number }>()
    const wake = yield* Queue.sliding<void>(1)
    const followed = new Map<string, Followed>()
    let made = 0
    let dropped = 0
    let unread = 0
    let said = false
    const problems: Array<string> = []
    const problem = (text: string) => {
      if (problems.length < MAX_PROBLEMS && !problems.includes(text)) problems.push(text)
    }

    const notice = (id: string, entries: ReadonlyArray<Entry.Entry>) => {
      const first = entries[0]
      const last = entries[entries.length - 1]
      if (first === undefined || last === undefined) return
      const f = followed.get(id)
      if (f !== undefined) {
        if (last.sequence > f.written) f.written = last.sequence
        return
      }
      const n = noted.get(id)
      if (n !== undefined) {
        if (last.sequence > n.written) n.written = last.sequence
        return
      }
      noted.set(id, { from: first.sequence, written: last.sequence })
      Queue.offerUnsafe(wake, undefined)
    }

    const enqueue = (session: string, spans: ReadonlyArray<Spans.Finished>) => {
      for (const span of spans) {
        made++
        if (!Queue.offerUnsafe(buffer, { session, span })) dropped++
      }
    }

    // A session whose spans are not all made: counted (and said in the end's line).
    const countUnread = (text: string) => {
      unread++
      problem(text)
    }
    // The same, also said at once the first time a loss is.
    const notExported = (id: string, text: string, why: string) =>
      Effect.suspend(() => {
        countUnread(text)
        if (said) return Effect.void
        said = true
        return options.note(`spans of session ${id} are not sent: ${why}`)
      })

    // A follower: the session from its first entry, each entry folded; spans ended
    // by the door's entries go to the buffer. However it stops, what is still open is
    // ended and sent when the door wrote anything.
    const follow = (f: Followed) => {
      let assembler = Spans.assembler()
      let fold: Spans.Fold | null = null
      return Effect.gen(function*() {
        const state = yield* journal.state(f.id).pipe(Effect.option)
        const meta = state._tag === "Some" ? state.value.meta : null
        const current = Spans.fold(f.id, meta)
        assembler = Spans.assembler()
        fold = current
        f.next = 0
        yield* journal.follow(f.id, 0).pipe(
          Stream.takeUntil((event) => event.entry.kind === SESSION_END_KIND && event.entry.sequence >= f.from),
          Stream.runForEach((event) =>
            Effect.sync(() => {
              const entry = event.entry
              const spans = assembler.apply(current.add(entry))
              f.next = entry.sequence + 1
              if (entry.sequence >= f.from) {
                f.lastActive = clock.currentTimeMillisUnsafe()
                enqueue(f.id, spans)
              }
            })
          )
        )
      }).pipe(
        // Noted once stored: storage that does not show the session yet will, and a read
        // that failed reads again (from the start, the fold afresh). Damage is not
        // retried: the follow already waited for storage to settle.
        Effect.retry({
          schedule: Schedule.spaced("100 millis"),
          times: 20,
          while: (e) => e._tag === "SessionNotFound" || e._tag === "StorageError"
        }),
        Effect.catch((e) => notExported(f.id, `following session ${f.id} failed: ${messageOf(e)}`, messageOf(e))),
        Effect.ensuring(Effect.sync(() => {
          if (followed.get(f.id) === f) followed.delete(f.id)
          if (fold !== null && f.next > f.from) enqueue(f.id, assembler.apply(fold.finish()))
          fold = null
        }))
      )
    }

    // A fiber interrupted before it started runs nothing, not even the follower's own
    // `ensuring`: it is forgotten here as well (else it stays followed for good, past
    // `maxSessions`, and the door's end waits on it). A follower let go before it read
    // what the door wrote leaves spans unmade: the session is counted and said.
    const letGo = (f: Followed) =>
      Effect.suspend(() => {
        const behind = f.next <= f.written
        return Effect.andThen(
          f.fiber === null ? Effect.void : Fiber.interrupt(f.fiber),
          Effect.suspend(() => {
            if (followed.get(f.id) === f) followed.delete(f.id)
            return behind
              ? notExported(
                f.id,
                `session ${f.id} was let go before it was read to its end`,
                "it was let go before it was read to its end"
              )
              : Effect.void
          })
        )
      })

    // Noted sessions become followed ones, within the bound.
    const startNoted = Effect.gen(function*() {
      // Deleting the entry being visited is safe in a Map's iteration.
      for (const [id, n] of noted) {
        noted.delete(id)
        if (followed.size >= maxSessions) {
          // The one idle longest among those that read what the door wrote; only when
          // none has, the one idle longest of all (a follower not started yet, or still
          // reading, has been idle since it was made, and letting it go loses spans).
          let idlest: Followed | undefined
          let behind: Followed | undefined
          for (const f of followed.values()) {
            if (f.next <= f.written) {
              if (behind === undefined || f.lastActive < behind.lastActive) behind = f
            } else if (idlest === undefined || f.lastActive < idlest.lastActive) idlest = f
          }
          const out = idlest ?? behind
          if (out !== undefined) yield* letGo(out)
        }
        const f: Followed = {
          id,
          from: n.from,
          written: n.written,
          next: 0,
          lastActive: clock.currentTimeMillisUnsafe(),
          fiber: null
        }
        followed.set(id, f)
        f.fiber = yield* Effect.forkIn(follow(f), followers)
      }
    })
    const supervisor = Queue.take(wake).pipe(Effect.andThen(startNoted), Effect.forever, Effect.forkScoped)

    // Sessions with nothing new for `idle` are let go.
    const sweeper = Effect.gen(function*() {
      yield* Effect.sleep(Duration.millis(Math.max(10, Math.floor(idleMillis / 4))))
      const now = clock.currentTimeMillisUnsafe()
      for (const f of followed.values()) if (now - f.lastActive >= idleMillis) yield* letGo(f)
    }).pipe(Effect.forever, Effect.forkScoped)

    const sayLoss = Effect.suspend(() => {
      if (said || (sender.sent() === sender.delivered() && dropped === 0)) return Effect.void
      said = true
      const why = [...sender.problems(), ...problems][0] ?? (dropped > 0 ? "the buffer was full" : "not accepted")
      return options.note(
        `spans are not reaching ${options.url} (${why}); they are dropped, the journal is not: a count follows at the end`
      )
    })

    const sendSome = (items: ReadonlyArray<{ readonly session: string; readonly span: Spans.Finished }>) => {
      const bySession = new Map<string, Array<Spans.Finished>>()
      for (const item of items) {
        const list = bySession.get(item.session)
        if (list === undefined) bySession.set(item.session, [item.span])
        else list.push(item.span)
      }
      for (const [session, spans] of bySession) sender.send(session, spans)
    }

    // Each batch is flushed and its answer awaited before the next; once the buffer is
    // ended and empty, the loop ends (never interrupted mid-request by the door's end).
    const sending = Effect.gen(function*() {
      const items = yield* Queue.takeBetween(buffer, 1, BATCH_SPANS)
      sendSome(items)
      yield* sender.flush
      yield* sayLoss
    }).pipe(Effect.forever, Effect.catchIf(Cause.isDone, () => Effect.void), Effect.forkScoped)

    const [supervisorFiber, sweeperFiber, senderFiber] = [yield* supervisor, yield* sweeper, yield* sending]

    const summary = (): Summary => {
      const lost = made - sender.delivered()
      const all = [...sender.problems(), ...problems]
      if (dropped > 0) all.push(`${dropped} dropped from a full buffer`)
      if (lost > 0 && all.length === 0) all.push("the collector did not accept every span")
      return { url: options.url, spans: made, delivered: sender.delivered(), dropped, lost, unread, problems: all }
    }

    const caughtUp: Effect.Effect<void> = Effect.suspend(() =>
      [...followed.values()].every((f) => f.next > f.written)
        ? Effect.void
        : Effect.andThen(Effect.sleep("10 millis"), caughtUp)
    )

    // The door's end: the followers read up to what the door wrote, every session is
    // let go (ending what is still open), and the sender sends what is left, a batch at a
    // time, then stops; all within `exitTimeout`.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        yield* Fiber.interrupt(supervisorFiber)
        yield* Fiber.interrupt(sweeperFiber)
        yield* startNoted
        yield* caughtUp
        for (const f of followed.values()) yield* letGo(f)
        yield* Queue.end(buffer)
        yield* Fiber.join(senderFiber)
      }).pipe(
        Effect.timeoutOption(exitTimeout),
        // Followers the bound cut off before they read what the door wrote, and
        // requests the collector had not answered by then.
        Effect.flatMap((ended) =>
          Effect.sync(() => {
            if (Option.isNone(ended) && sender.sent() > sender.delivered()) {
              problem(`the collector had not answered within ${Duration.format(exitTimeout)} of the door's end`)
            }
            for (const f of followed.values()) {
              if (f.next <= f.written) {
                countUnread(`session ${f.id} was not read to its end within ${Duration.format(exitTimeout)}`)
              }
            }
          })
        )
      )
    )

    const tap = (persistence: Persistence.Persistence["Service"]): Persistence.Persistence["Service"] => {
      const open = ((id: string, openOptions: Persistence.OpenOptions) =>
        Effect.map(persistence.open(id, openOptions), (handle) => {
          if (!("append" in handle)) {
            return handle
          }
          const write: Persistence.WriteHandle = {
            ...handle,
            append: (request) =>
              Effect.tap(handle.append(request), () =>
                Effect.sync(() => {
                  try {
                    notice(id, request.entries)
                  } catch {
                    // Noting is bookkeeping: it never fails a write.
                  }
                }))
          }
          return write
        })) as Persistence.Open
      return Persistence.Persistence.of({ ...persistence, open })
    }

    return { tap, summary, ready: sender.ready }
  })

/**
 * `door` with a live export beside it, given the door's storage tapped: the
 * followers read over `persistence` (the untapped storage), and at the door's end,
 * whatever it came to, a loss is counted in one line (`options.note`).
 *
 * @since 0.1.0
 */
export const around = <A, E, R>(
  persistence: Persistence.Persistence["Service"],
  options: Options,
  door: (tapped: Persistence.Persistence["Service"]) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | StorageError, Exclude<R, Scope.Scope>> =>
  Effect.gen(function*() {
    let live: Live | undefined
    return yield* Effect.scoped(
      Effect.gen(function*() {
        const reader = yield* Layer.build(
          SessionJournal.layer().pipe(Layer.provide(Layer.succeed(Persistence.Persistence, persistence)))
        )
        live = yield* make(options).pipe(Effect.provideContext(reader))
        return yield* door(live.tap(persistence))
      })
    ).pipe(Effect.ensuring(Effect.suspend(() => {
      const s = live?.summary()
      if (s === undefined || (s.lost === 0 && s.unread === 0)) return Effect.void
      const unread = s.unread === 0 ? "" : `, and ${s.unread} session${s.unread === 1 ? " was" : "s were"} not exported`
      return options.note(
        `${s.lost} of ${s.spans} spans were not delivered to ${s.url}${unread}: ${s.problems.join("; ")}`
      )
    })))
  })
