/**
 * The `session-journal` command tree: global flags, one subcommand per
 * operation, and the wrapper that gives each handler its storage and turns its
 * failures into one sentence on stderr and the contract's exit code.
 *
 * @since 0.1.0
 */
import {
  Checkpoint,
  CorruptJournal,
  CorruptReason,
  JournalState,
  Persistence,
  SessionJournal,
  SessionNotFound
} from "@session-journal/core"
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { VerificationFailed } from "../Failure.ts"
import {
  Dir,
  Json,
  nonNegative,
  Postgres,
  sessionId,
  validId,
  Verbose,
  withJournal,
  withoutJournal
} from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import * as Verify from "../Verify.ts"
import * as ReportFile from "../viewer/ReportFile.ts"
import type * as Serve from "../viewer/Serve.ts"
import * as ClaudeCode from "./ClaudeCode.ts"
import * as Codex from "./Codex.ts"
import * as Demo from "./Demo.ts"
import { mcp } from "./Mcp.ts"
import * as MirrorFiles from "./MirrorFiles.ts"
import { policy } from "./PolicyCommands.ts"
import { exportCmd, list, show, stats, tail } from "./ReadCommands.ts"
import * as TreeCommands from "./TreeCommands.ts"
import { append, importCmd, record, unlock } from "./WriteCommands.ts"

export {
  /**
   * What every handler gets besides its own flags.
   *
   * @since 0.1.0
   */
  type Context,
  /**
   * `--dir DIR`: the journal directory.
   *
   * @since 0.1.0
   */
  Dir,
  /**
   * `--json`: machine output.
   *
   * @since 0.1.0
   */
  Json,
  /**
   * `--postgres URL`: keep journals in PostgreSQL.
   *
   * @since 0.1.0
   */
  Postgres,
  /**
   * `--verbose`: stack traces of failures.
   *
   * @since 0.1.0
   */
  Verbose
} from "../internal/commandKit.ts"

// ---------------------------------------------------------------------------
// verify / checkpoint / repair / mirror / demo

const verify = Command.make("verify", {
  ids: Argument.String("id").pipe(Argument.variadic(), Argument.withDescription("Sessions to verify (all when none)")),
  ...TreeCommands.verifyFlags
}, (a) =>
  withJournal(({ json, storage }) =>
    Effect.gen(function*() {
      if (Option.isSome(a.checkpoint)) {
        return yield* TreeCommands.verifyCheckpointOf(a.ids, a.checkpoint.value, a.key, storage, json)
      }
      if (a.key.length > 0) {
        return yield* TreeCommands.keyWithoutCheckpoint
      }
      for (const id of a.ids) {
        yield* validId(id)
      }
      const journal = yield* SessionJournal.SessionJournal
      const ids = a.ids.length > 0 ? [...a.ids] : (yield* journal.list).map((s) => s.id)
      const reports = yield* Output.withProgress("verify", ids.length, (bar) =>
        Effect.forEach(ids, (id) =>
          Effect.tap(Verify.session(id, storage), () => Effect.sync(() => bar.advance(1)))))
      if (json) {
        yield* Output.json({ sessions: reports })
      } else {
        if (reports.length === 0) {
          yield* Output.write("no sessions\n")
        }
        yield* Output.lines(reports.map(Verify.text))
      }
      const failed = reports.filter((r) =>
        !r.ok
      ).length
      if (failed > 0) return yield* new VerificationFailed({ failed, total: reports.length })
    }), { readOnly: true })).pipe(
    Command.withDescription("Check every retained segment and the checkpoint; all sessions when no ID")
  )

const checkpoint = Command.make(
  "checkpoint",
  { id: sessionId, ...TreeCommands.checkpointFlags },
  (a) =>
    withJournal(({ json, storage }) =>
      Effect.gen(function*() {
        if (Option.isSome(a.sign)) return yield* TreeCommands.signCheckpoint(a.id, a.sign.value, storage, json)
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
            reason: new CorruptReason.Stopped({
              reason: stopped.reason,
              detail: stopped.detail,
              advice: "run repair first"
            })
          })
        }
        yield* handle.checkpoint(Checkpoint.encode(loaded.state))
        const head = JournalState.head(loaded.state)
        if (json) return yield* Output.json({ id: a.id, next_sequence: loaded.state.next_sequence, head })
        yield* Output.write(`checkpoint of ${a.id} written at sequence ${loaded.state.next_sequence} (head ${head})\n`)
      })
    )
).pipe(Command.withDescription("Force a checkpoint of a session"))

const repair = Command.make(
  "repair",
  { id: sessionId },
  (a) =>
    withJournal(({ json, storage }) =>
      Effect.gen(function*() {
        yield* validId(a.id)
        const report = yield* Verify.repair(a.id, storage)
        if (json) return yield* Output.json(report)
        yield* Output.lines(Verify.repairText(report))
      })
    )
).pipe(Command.withDescription("Set damaged bytes aside and make the session writable, with a report"))

const mirror = Command.make("mirror", {
  dest: Argument.String("dest").pipe(Argument.withDescription("Backup directory (created 0700)"))
}, (a) =>
  withoutJournal(({ json, storage }) =>
    Effect.gen(function*() {
      const result = yield* MirrorFiles.run(storage, a.dest)
      if (json) yield* Output.json(result)
      else yield* Output.lines(MirrorFiles.text(result))
      yield* MirrorFiles.check(result)
    })
  )).pipe(Command.withDescription("Back up every session to DEST, each copy verified before it replaces the last"))

const report = Command.make(
  "report",
  {
    id: sessionId,
    out: Flag.String("out").pipe(
      Flag.optional,
      Flag.withMetavar("FILE"),
      Flag.withDescription("Where to write the report (default ID.html)")
    )
  },
  (a) =>
    withJournal(({ json, storage }) => ReportFile.run(a.id, Option.getOrUndefined(a.out), storage, json), {
      readOnly: true
    })
).pipe(
  Command.withDescription("Write a self-contained HTML report of a session: header with verification, charts, timeline")
)

const serve = Command.make("serve", {
  port: nonNegative("port").pipe(
    Flag.withDefault(8080),
    Flag.withDescription("Port to listen on (0 picks a free one)")
  ),
  host: Flag.String("host").pipe(
    Flag.withDefault("127.0.0.1"),
    Flag.withDescription("Address to bind (default 127.0.0.1)")
  ),
  allowRemote: Flag.Boolean("allow-remote").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
      "Allow --host to be an address other machines reach (anyone who reaches it reads every session)"
    )
  ),
  allowedHost: Flag.String("allowed-host").pipe(
    Flag.atLeast(0),
    Flag.withMetavar("NAME[:PORT]"),
    Flag.withDescription(
      "Also answer requests addressed to NAME (repeatable); only 127.0.0.1, localhost and [::1] otherwise"
    )
  )
}, (a) =>
  withJournal(({ storage }) =>
    // The HTTP server's modules load only for this command, not at every start.
    Effect.flatMap(
      Effect.promise((): Promise<typeof Serve> => import("../viewer/Serve.ts")),
      (module) =>
        module.run({ port: a.port, host: a.host, allowRemote: a.allowRemote, allowedHosts: a.allowedHost, storage })
    ), { readOnly: true })).pipe(
    Command.withDescription("Serve a read-only local web viewer of the journal, with sessions updating live")
  )

const demo = Command.make("demo", {}, () => withJournal(({ json, storage }) => Demo.run(json, storage))).pipe(
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
      "5 the policy would deny calls (policy test), 6 output failed (what was written is durable: do not write it again), " +
      "70 unexpected failure (a bug), 130 interrupted. " +
      `Environment: $${Storage.DIR_VAR} (default of --dir), $${Storage.PG_URL_VAR} (default of --postgres), ` +
      `$${Storage.TABLE_PREFIX_VAR} (PostgreSQL table prefix, default session_journal_), ` +
      `$${Storage.RETENTION_VAR}=1 (remove the segments a checkpoint covers).`
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
    unlock,
    mirror,
    report,
    serve,
    demo,
    policy,
    ...TreeCommands.commands,
    ClaudeCode.make((body) => withJournal(body)),
    Codex.make((body) => withJournal(body)),
    mcp
  ]),
  Command.withGlobalFlags([Dir, Json, Verbose, Postgres])
)
