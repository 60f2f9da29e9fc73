/**
 * The `session-journal` command tree: global flags, one subcommand per
 * operation, and the wrapper that gives each handler its storage and turns its
 * failures into one sentence on stderr and the contract's exit code.
 *
 * @since 0.1.0
 */
import {
  Checkpoint,
  Entry,
  JournalState,
  Persistence,
  SessionJournal,
  SessionNotFound,
  CorruptJournal
} from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Argument, Command, Flag, GlobalFlag } from "effect/cli"
import * as fs from "node:fs"
import * as ClaudeCode from "./ClaudeCode.ts"
import * as Demo from "./Demo.ts"
import {
  describe as describeFailure,
  Exit,
  ExitCode,
  exitCodeOf,
  type Failure,
  ImportStopped,
  InvalidInput,
  stackOf,
  VerificationFailed
} from "./Failure.ts"
import * as Import from "./Import.ts"
import * as Input from "./Input.ts"
import * as MirrorFiles from "./MirrorFiles.ts"
import * as Output from "./Output.ts"
import * as ReportFile from "./ReportFile.ts"
import type * as Serve from "./Serve.ts"
import * as Storage from "./Storage.ts"
import * as Verify from "./Verify.ts"

// ---------------------------------------------------------------------------
// Global flags

/**
 * `--dir DIR`: the journal root (default `$SESSION_JOURNAL_DIR`, else `./.session-journal`).
 *
 * @since 0.1.0
 */
export const Dir = GlobalFlag.Setting("dir")({
  flag: Flag.String("dir").pipe(
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription("Journal directory (default $SESSION_JOURNAL_DIR, else ./.session-journal)")
  )
})

/**
 * `--json`: machine output (one JSON document, or JSON lines for streams).
 *
 * @since 0.1.0
 */
export const Json = GlobalFlag.Setting("json")({
  flag: Flag.Boolean("json").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Machine output: one JSON document, or JSON lines for streams")
  )
})

/**
 * `--verbose`: add stack traces to failures.
 *
 * @since 0.1.0
 */
export const Verbose = GlobalFlag.Setting("verbose")({
  flag: Flag.Boolean("verbose").pipe(Flag.withDefault(false), Flag.withDescription("Print stack traces of failures"))
})

/**
 * `--postgres URL`: keep journals in PostgreSQL (default `$SESSION_JOURNAL_PG_URL`).
 *
 * @since 0.1.0
 */
export const Postgres = GlobalFlag.Setting("postgres")({
  flag: Flag.String("postgres").pipe(
    Flag.optional,
    Flag.withMetavar("URL"),
    Flag.withDescription("Keep journals in PostgreSQL at URL (default $SESSION_JOURNAL_PG_URL)")
  )
})

// ---------------------------------------------------------------------------
// Handler wrapper

/**
 * What every handler gets besides its own flags.
 *
 * @since 0.1.0
 */
export interface Context {
  readonly json: boolean
  readonly storage: Storage.Options
}

type Journal = SessionJournal.SessionJournal | Persistence.Persistence

const reportFailure = (cause: Cause.Cause<Failure>, verbose: boolean, flags: boolean) =>
  Effect.gen(function*() {
    if (Cause.hasInterruptsOnly(cause)) return yield* Effect.failCause(cause as Cause.Cause<never>)
    const error = Cause.squash(cause)
    const typed = Cause.findErrorOption(cause)
    const code = Option.isSome(typed) ? exitCodeOf(typed.value) : ExitCode.defect
    const text = code === ExitCode.defect
      ? `unexpected failure (a bug): ${describeFailure(error)}`
      : describeFailure(error, { flags })
    yield* Output.errorLine(`session-journal: ${text}`)
    if (verbose || code === ExitCode.defect) yield* Output.errorLine(stackOf(cause))
    return yield* new Exit({ code })
  })

const settings = Effect.gen(function*() {
  const dir = yield* Dir
  const json = yield* Json
  const verbose = yield* Verbose
  const postgres = yield* Postgres
  const storage: Storage.Options = {
    dir: Storage.resolveDir(Option.getOrUndefined(dir)),
    ...Storage.resolvePostgres(Option.getOrUndefined(postgres))
  }
  return { json, verbose, storage }
})

/**
 * Runs a handler with the journal of the chosen storage. Failures are reported
 * here, so the top level only sees `Exit`.
 *
 * @since 0.1.0
 */
const withJournal = <E extends Failure>(
  body: (ctx: Context) => Effect.Effect<void, E, Journal | Scope.Scope>,
  options?: { readonly flags?: boolean }
) =>
  Effect.gen(function*() {
    const { json, verbose, storage } = yield* settings
    const live = SessionJournal.layer().pipe(Layer.provideMerge(Storage.layer(storage)))
    yield* Effect.scoped(body({ json, storage })).pipe(
      Effect.provide(live),
      Effect.catchCause((cause) => reportFailure(cause, verbose, options?.flags === true))
    )
  })

/**
 * Runs a handler that works on files directly (no journal service).
 *
 * @since 0.1.0
 */
const withoutJournal = <E extends Failure>(body: (ctx: Context) => Effect.Effect<void, E, Scope.Scope>) =>
  Effect.gen(function*() {
    const { json, verbose, storage } = yield* settings
    yield* Effect.scoped(body({ json, storage })).pipe(
      Effect.catchCause((cause) => reportFailure(cause, verbose, false))
    )
  })

const validId = (id: string) => Effect.fromResult(Entry.validateSessionId(id))

const sessionId = Argument.String("id").pipe(Argument.withDescription("Session id (^[A-Za-z0-9_-]{1,128}$)"))

const nonNegative = (name: string) =>
  Flag.Int(name).pipe(Flag.filter((n) => n >= 0, (n) => `must be a non-negative integer, got ${n}`))

// ---------------------------------------------------------------------------
// record / append / import

const record = Command.make("record", {
  id: sessionId,
  tool: Flag.String("tool").pipe(Flag.withDescription("Tool name")),
  server: Flag.String("server").pipe(Flag.withDescription("Server id")),
  agent: Flag.String("agent").pipe(Flag.withDescription("Agent id")),
  read: Flag.Int("read").pipe(Flag.withDefault(0), Flag.withDescription("Bytes read by the call")),
  written: Flag.Int("written").pipe(Flag.withDefault(0), Flag.withDescription("Bytes written by the call")),
  depth: Flag.Int("depth").pipe(Flag.withDefault(0), Flag.withDescription("Delegation depth")),
  denied: Flag.Boolean("denied").pipe(Flag.withDefault(false), Flag.withDescription("Record the call as denied"))
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const entry = yield* journal.record(a.id, {
        tool_name: a.tool,
        server_id: a.server,
        agent_id: a.agent,
        bytes_read: a.read,
        bytes_written: a.written,
        delegation_depth: a.depth,
        allowed: !a.denied
      })
      yield* Output.write(Output.entryLine(json)(entry) + "\n")
    }), { flags: true })).pipe(Command.withDescription("Append a tool entry and print it"))

const parsePayload = (text: string, field: string) =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (e) => new InvalidInput({ field, reason: `not valid JSON (${e instanceof Error ? e.message : String(e)})` })
  })

// `--payload -` reads stdin and `--payload @FILE` a file (neither is JSON, so
// there is no ambiguity), bounded and as strict UTF-8.
const payloadText = (flag: string) => {
  if (flag !== "-" && !flag.startsWith("@")) return Effect.succeed(flag)
  const file = flag === "-" ? "-" : flag.slice(1)
  return Effect.tryPromise({
    try: () => Input.readBounded(file === "-" ? process.stdin : fs.createReadStream(file), "--payload"),
    catch: (e) => new InvalidInput({ field: "--payload", reason: `cannot read ${file}: ${e instanceof Error ? e.message : String(e)}` })
  }).pipe(Effect.flatMap(Effect.fromResult))
}

const append = Command.make("append", {
  id: sessionId,
  kind: Flag.String("kind").pipe(Flag.withDefault("message"), Flag.withDescription("Entry kind (default message)")),
  payload: Flag.String("payload").pipe(
    Flag.withMetavar("JSON"),
    Flag.withDescription("Payload, any JSON; - reads it from stdin, @FILE from FILE (strict UTF-8, at most 8 MiB)")
  )
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const payload = yield* parsePayload(yield* payloadText(a.payload), "--payload")
      const journal = yield* SessionJournal.SessionJournal
      const entry = yield* journal.append(a.id, a.kind, payload)
      yield* Output.write(Output.entryLine(json)(entry) + "\n")
    }), { flags: true })).pipe(Command.withDescription("Append a message (default kind) or an entry of another kind"))

/**
 * Turns one import line into a write item (see `Import.importItem`).
 *
 * @since 0.1.0
 */
export const importItem = Import.importItem

const inputBytes = (file: string): Stream.Stream<Uint8Array, InvalidInput> =>
  Stream.unwrap(Effect.sync(() =>
    Stream.fromAsyncIterable(
      (file === "-" ? process.stdin : fs.createReadStream(file)) as AsyncIterable<Uint8Array>,
      (e) => new InvalidInput({ field: "FILE", reason: `cannot read ${file}: ${e instanceof Error ? e.message : String(e)}` })
    )
  ))

const importCmd = Command.make("import", {
  id: sessionId,
  file: Argument.String("file").pipe(
    Argument.withDefault("-"),
    Argument.withDescription("JSON lines to import; - or nothing for stdin")
  )
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      yield* validId(a.id)
      const journal = yield* SessionJournal.SessionJournal
      // For a file the bar measures bytes read; for stdin it counts entries.
      const size = a.file === "-" ? 0 : yield* Effect.sync(() => {
        try {
          return fs.statSync(a.file).size
        } catch {
          return 0
        }
      })
      const summary = yield* Output.withProgress(`import ${a.id}`, size, (bar) =>
        Import.run({
          id: a.id,
          source: inputBytes(a.file),
          writeAll: (items) => journal.writeAll(a.id, items),
          onRead: (n) => {
            if (size > 0) bar.advance(n)
          },
          // Printed only once durable: a caller reading this output knows
          // exactly which entries were acknowledged.
          onDurable: (written) =>
            Effect.suspend(() => {
              if (size === 0) bar.advance(written.length)
              return json ? Output.lines(written.map(Output.entryJson)) : Effect.void
            })
        })).pipe(
          Effect.tapError((e) =>
            json && e._tag === "ImportStopped" ? Output.json(stoppedJson(e)) : Effect.void
          )
        )
      if (!json) {
        const { imported, last } = summary
        yield* Output.write(
          `imported ${imported} entr${imported === 1 ? "y" : "ies"} into ${a.id}` +
            (last === undefined ? "\n" : ` (last sequence ${last.sequence})\n`)
        )
      }
    }))).pipe(Command.withDescription(
      "Append JSON lines ({tool_name,…} or {kind,payload}) as they arrive, each durable within moments; " +
        "a bad line stops the import after every line before it is committed"
    ))

// The last JSON line of `--json import` when a line stopped it.
const stoppedJson = (e: ImportStopped) => ({
  imported: e.imported,
  last_sequence: e.lastSequence,
  stopped: { line: e.input.line ?? null, field: e.input.field, reason: e.input.reason }
})

// ---------------------------------------------------------------------------
// list / show / stats / tail / export

const list = Command.make("list", {}, () =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const sessions = yield* journal.list
      const updated = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
      if (json) {
        return yield* Output.json({
          sessions: sessions.map((s) => ({
            id: s.id,
            entries: s.entries,
            head: s.head,
            last_hash: s.lastHash,
            updated: updated(s.updatedAt),
            bytes: s.bytes,
            // Present only for a session that does not load cleanly.
            ...(s.problem === null ? {} : { problem: s.problem })
          }))
        })
      }
      if (sessions.length === 0) return yield* Output.write("no sessions\n")
      // A session that does not load cleanly is marked, never shown as if its
      // checkpoint's claims held: its entries and head are those of the valid prefix.
      yield* Output.lines(Output.table(
        ["ID", "ENTRIES", "HEAD", "UPDATED", "BYTES"],
        sessions.map((s) => [
          s.problem === null ? s.id : `${s.id} (DAMAGED)`,
          String(s.entries),
          s.head.slice(0, 16),
          updated(s.updatedAt) ?? "-",
          s.bytes === null ? "-" : String(s.bytes)
        ])
      ))
      const damaged = sessions.filter((s) => s.problem !== null)
      if (damaged.length > 0) {
        yield* Output.lines(damaged.map((s) => `${s.id}: ${s.problem} (run: session-journal verify ${s.id})`))
      }
    }))).pipe(Command.withDescription("List sessions: id, entries, head, updated, bytes on disk; damaged sessions are marked"))

const show = Command.make("show", {
  id: sessionId,
  from: nonNegative("from").pipe(Flag.withDefault(0), Flag.withDescription("First sequence to show")),
  limit: nonNegative("limit").pipe(Flag.optional, Flag.withDescription("Most entries to show"))
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const fmt = Output.entryLine(json)
      yield* journal.entries(a.id, { from: a.from, limit: Option.getOrUndefined(a.limit) }).pipe(
        Stream.runForEachArray((chunk) => Output.lines(chunk.map(fmt)))
      )
    }))).pipe(Command.withDescription("Print entries from the full history"))

const stats = Command.make("stats", { id: sessionId }, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const state = yield* journal.state(a.id)
      const doc = Output.statsJson(state)
      if (json) return yield* Output.json(doc)
      const df = doc.data_flow
      const out = [
        `session          ${doc.session_id}`,
        `entries          ${state.next_sequence} (${doc.entry_count} retained)`,
        `head             ${doc.head_hash}`,
        `invocations      ${df.total_invocations}`,
        `messages         ${doc.message_count}`,
        `bytes read       ${df.total_bytes_read}`,
        `bytes written    ${df.total_bytes_written}`,
        `max depth        ${df.max_delegation_depth}`,
        `streak           ${doc.current_streak_tool ?? "-"} x${doc.current_streak_len}`
      ]
      if (state.meta !== null) {
        if (state.meta.title !== undefined) out.push(`title            ${state.meta.title}`)
        if (state.meta.labels !== undefined) out.push(`labels           ${state.meta.labels.join(", ")}`)
      }
      const counts = Array.from(JournalState.snapshot(state).tool_counts)
      if (Output.stdoutIsTerminal() && counts.length > 0) {
        out.push("", "tool calls")
        out.push(...Output.barChart(counts, process.stdout.columns || 80))
      } else {
        for (const [name, n] of counts.sort((x, y) => (x[0] < y[0] ? -1 : 1))) out.push(`tool_count       ${name} ${n}`)
      }
      yield* Output.lines(out)
    }))).pipe(Command.withDescription("Snapshot counters, message count and metadata; a bar chart on a terminal"))

const tail = Command.make("tail", {
  id: sessionId,
  lines: nonNegative("lines").pipe(Flag.withAlias("n"), Flag.withDefault(10), Flag.withDescription("How many of the last entries to print first")),
  follow: Flag.Boolean("follow").pipe(Flag.withAlias("f"), Flag.withDefault(false), Flag.withDescription("Keep printing entries written later, by any process"))
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const state = yield* journal.state(a.id)
      const from = Math.max(0, state.next_sequence - a.lines)
      const fmt = Output.entryLine(json)
      const entries = a.follow ? journal.follow(a.id, from) : journal.entries(a.id, { from })
      yield* entries.pipe(Stream.runForEachArray((chunk) => Output.lines(chunk.map(fmt))))
    }))).pipe(Command.withDescription("Print the last entries; --follow keeps printing new ones from other processes"))

const exportCmd = Command.make("export", {
  id: sessionId,
  format: Flag.Literals("format", ["jsonl", "json"]).pipe(Flag.withDefault("jsonl" as const), Flag.withDescription("jsonl (one entry a line) or json (one array)"))
}, (a) =>
  withJournal(() =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const state = yield* journal.state(a.id)
      let first = true
      yield* Output.withProgress(`export ${a.id}`, state.next_sequence, (bar) =>
        Effect.gen(function*() {
          if (a.format === "json") yield* Output.write("[")
          yield* journal.entries(a.id).pipe(
            Stream.runForEachArray((chunk) => {
              bar.advance(chunk.length)
              if (a.format === "jsonl") return Output.lines(chunk.map(Output.entryJson))
              const text = chunk.map(Output.entryJson).join(",\n")
              const sep = first ? "\n" : ",\n"
              first = false
              return Output.write(sep + text)
            })
          )
          if (a.format === "json") yield* Output.write(first ? "]\n" : "\n]\n")
        }))
    }))).pipe(Command.withDescription("Write the full history to stdout"))

// ---------------------------------------------------------------------------
// verify / checkpoint / repair / mirror / demo

const verify = Command.make("verify", {
  ids: Argument.String("id").pipe(Argument.variadic(), Argument.withDescription("Sessions to verify (all when none)"))
}, (a) =>
  withJournal(({ json, storage }) =>
    Effect.gen(function*() {
      for (const id of a.ids) yield* validId(id)
      const journal = yield* SessionJournal.SessionJournal
      const ids = a.ids.length > 0 ? [...a.ids] : (yield* journal.list).map((s) => s.id)
      const reports = yield* Output.withProgress("verify", ids.length, (bar) =>
        Effect.forEach(ids, (id) => Effect.tap(Verify.session(id, storage), () => Effect.sync(() => bar.advance(1)))))
      if (json) yield* Output.json({ sessions: reports })
      else {
        if (reports.length === 0) yield* Output.write("no sessions\n")
        yield* Output.lines(reports.map(Verify.text))
      }
      const failed = reports.filter((r) => !r.ok).length
      if (failed > 0) return yield* new VerificationFailed({ failed, total: reports.length })
    }))).pipe(Command.withDescription("Check every retained segment and the checkpoint; all sessions when no ID"))

const checkpoint = Command.make("checkpoint", { id: sessionId }, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      yield* validId(a.id)
      const persistence = yield* Persistence.Persistence
      const handle = yield* persistence.open(a.id, { mode: "write" })
      const loaded = yield* handle.load
      if (!loaded.exists) return yield* new SessionNotFound({ id: a.id })
      const stopped = loaded.recovery.stopped
      if (stopped !== null) {
        return yield* new CorruptJournal({
          segment: stopped.segment,
          offset: stopped.offset,
          reason: `${stopped.reason}: ${stopped.detail} (run repair first)`
        })
      }
      yield* handle.checkpoint(Checkpoint.encode(loaded.state))
      const head = JournalState.head(loaded.state)
      if (json) return yield* Output.json({ id: a.id, next_sequence: loaded.state.next_sequence, head })
      yield* Output.write(`checkpoint of ${a.id} written at sequence ${loaded.state.next_sequence} (head ${head})\n`)
    }))).pipe(Command.withDescription("Force a checkpoint of a session"))

const repair = Command.make("repair", { id: sessionId }, (a) =>
  withJournal(({ json, storage }) =>
    Effect.gen(function*() {
      yield* validId(a.id)
      const report = yield* Verify.repair(a.id, storage)
      if (json) return yield* Output.json(report)
      yield* Output.lines(Verify.repairText(report))
    }))).pipe(Command.withDescription("Set damaged bytes aside and make the session writable, with a report"))

const mirror = Command.make("mirror", {
  dest: Argument.String("dest").pipe(Argument.withDescription("Backup directory (created 0700)"))
}, (a) =>
  withoutJournal(({ json, storage }) =>
    Effect.gen(function*() {
      const result = yield* MirrorFiles.run(storage, a.dest)
      if (json) yield* Output.json(result)
      else yield* Output.lines(MirrorFiles.text(result))
      yield* MirrorFiles.check(result)
    }))).pipe(Command.withDescription("Back up every session to DEST, each copy verified before it replaces the last"))

const report = Command.make("report", {
  id: sessionId,
  out: Flag.String("out").pipe(Flag.optional, Flag.withMetavar("FILE"), Flag.withDescription("Where to write the report (default ID.html)"))
}, (a) =>
  withJournal(({ json, storage }) => ReportFile.run(a.id, Option.getOrUndefined(a.out), storage, json))).pipe(
    Command.withDescription("Write a self-contained HTML report of a session: header with verification, charts, timeline")
  )

const serve = Command.make("serve", {
  port: nonNegative("port").pipe(Flag.withDefault(8080), Flag.withDescription("Port to listen on (0 picks a free one)")),
  host: Flag.String("host").pipe(Flag.withDefault("127.0.0.1"), Flag.withDescription("Address to bind (default 127.0.0.1)"))
}, (a) =>
  withJournal(({ storage }) =>
    // The HTTP server's modules load only for this command, not at every start.
    Effect.flatMap(
      Effect.promise((): Promise<typeof Serve> => import("./Serve.ts")),
      (module) => module.run({ port: a.port, host: a.host, storage })
    ))).pipe(
    Command.withDescription("Serve a read-only local web viewer of the journal, with sessions updating live")
  )

const demo = Command.make("demo", {}, () =>
  withJournal(({ json, storage }) => Demo.run(json, storage))).pipe(
    Command.withDescription("Run a simulated agent session with guards into the journal directory, then verify it")
  )

/**
 * The root command with every subcommand and the global flags.
 *
 * @since 0.1.0
 */
export const root = Command.make("session-journal").pipe(
  Command.withDescription(
    "A durable, tamper-evident journal of AI-agent sessions. " +
      "Exit codes: 0 ok, 1 verification failed, 2 bad usage or input, 3 storage error, 4 session locked by another writer, " +
        "70 unexpected failure (a bug), 130 interrupted."
  ),
  Command.withSubcommands([
    record,
    append,
    importCmd,
    list,
    show,
    stats,
    verify,
    tail,
    exportCmd,
    checkpoint,
    repair,
    mirror,
    report,
    serve,
    demo,
    ClaudeCode.make((body) => withJournal(body))
  ]),
  Command.withGlobalFlags([Dir, Json, Verbose, Postgres])
)
