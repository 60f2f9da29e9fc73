/**
 * The commands that write: `record`, `append`, `import` (each with `--wait` for the
 * session's lock), and `unlock`, which removes a stale lock.
 */
import { type Entry, SessionJournal } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Lock, NodePersistence } from "@session-journal/node"
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { ImportStopped, InvalidInput, NotAvailable } from "../Failure.ts"
import * as Input from "../Input.ts"
import { sessionId, validId, waitFlag, withJournal, withoutJournal } from "../internal/commandKit.ts"
import * as RecordCall from "../internal/recordCall.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import * as Import from "./Import.ts"

// ---------------------------------------------------------------------------
// record / append / import

/** The `record` command. */
export const record = Command.make("record", {
  id: sessionId,
  tool: Flag.String("tool").pipe(Flag.withDescription("Tool name")),
  server: Flag.String("server").pipe(Flag.withDescription("Server id")),
  agent: Flag.String("agent").pipe(Flag.withDescription("Agent id")),
  read: Flag.Int("read").pipe(Flag.withDefault(0), Flag.withDescription("Bytes read by the call")),
  written: Flag.Int("written").pipe(Flag.withDefault(0), Flag.withDescription("Bytes written by the call")),
  depth: Flag.Int("depth").pipe(Flag.withDefault(0), Flag.withDescription("Delegation depth")),
  denied: Flag.Boolean("denied").pipe(Flag.withDefault(false), Flag.withDescription("Record the call as denied")),
  wait: waitFlag
}, (a) =>
  // The entry recognizes a plain `record` and runs it without the command tree
  // (`RecordProcess.ts`): both run `RecordCall.record` with the same options.
  withJournal(({ json }) => RecordCall.record(a, json), { flags: true, lockWait: a.wait })).pipe(
    Command.withDescription("Append a tool entry and print it")
  )

const parsePayload = (text: string, field: string) =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (e) => new InvalidInput({ field, reason: `not valid JSON (${messageOf(e)})` })
  })

// `--payload -` reads stdin and `--payload @FILE` a file (neither is JSON, so
// there is no ambiguity), bounded and as strict UTF-8.
const payloadText = (flag: string) => {
  if (flag !== "-" && !flag.startsWith("@")) return Effect.succeed(flag)
  const file = flag === "-" ? "-" : flag.slice(1)
  return Effect.flatMap(Input.Stdin, (stdin) =>
    Effect.tryPromise({
      try: () => Input.readBounded(file === "-" ? stdin() : fs.createReadStream(file), "--payload"),
      catch: (e) =>
        new InvalidInput({
          field: "--payload",
          reason: `cannot read ${file}: ${messageOf(e)}`
        })
    }).pipe(Effect.flatMap(Effect.fromResult)))
}

/** The `append` command. */
export const append = Command.make("append", {
  id: sessionId,
  kind: Flag.String("kind").pipe(Flag.withDefault("message"), Flag.withDescription("Entry kind (default message)")),
  payload: Flag.String("payload").pipe(
    Flag.withMetavar("JSON"),
    Flag.withDescription("Payload, any JSON; - reads it from stdin, @FILE from FILE (strict UTF-8, at most 8 MiB)")
  ),
  wait: waitFlag
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const payload = yield* parsePayload(yield* payloadText(a.payload), "--payload")
      const journal = yield* SessionJournal.SessionJournal
      const entry = yield* journal.append(a.id, a.kind, payload)
      yield* RecordCall.printDurable(Output.write(Output.entryLine(json)(entry) + "\n"), a.id, 1, entry)
    }), { flags: true, lockWait: a.wait })).pipe(
    Command.withDescription("Append a message (default kind) or an entry of another kind")
  )

/**
 * Turns one import line into a write item (see `Import.importItem`).
 *
 * @since 0.1.0
 */
export const importItem = Import.importItem

const inputBytes = (file: string): Stream.Stream<Uint8Array, InvalidInput> =>
  Stream.unwrap(Effect.map(Input.Stdin, (stdin) =>
    Stream.fromAsyncIterable(
      (file === "-" ? stdin() : fs.createReadStream(file)) as AsyncIterable<Uint8Array>,
      (e) =>
        new InvalidInput({
          field: "FILE",
          reason: `cannot read ${file}: ${messageOf(e)}`
        })
    )))

/** The `importCmd` command. */
export const importCmd = Command.make("import", {
  id: sessionId,
  file: Argument.String("file").pipe(
    Argument.withDefault("-"),
    Argument.withDescription("JSON lines to import; - or nothing for stdin")
  ),
  wait: waitFlag
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
      let durable = 0
      let lastDurable: Entry.Entry | undefined
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
              durable += written.length
              lastDurable = written[written.length - 1] ?? lastDurable
              return json && lastDurable !== undefined
                ? RecordCall.printDurable(Output.lines(written.map(Output.entryJson)), a.id, durable, lastDurable)
                : Effect.void
            })
        })).pipe(
          Effect.tapError((e) =>
            json && e._tag === "ImportStopped"
              ? lastDurable === undefined
                ? Output.json(stoppedJson(e))
                : RecordCall.printDurable(Output.json(stoppedJson(e)), a.id, durable, lastDurable)
              : Effect.void
          )
        )
      if (!json) {
        const { imported, last } = summary
        const text = `imported ${imported} entr${imported === 1 ? "y" : "ies"} into ${a.id}` +
          (last === undefined ? "\n" : ` (last sequence ${last.sequence})\n`)
        yield* last === undefined
          ? Output.write(text)
          : RecordCall.printDurable(Output.write(text), a.id, imported, last)
      }
    }), { lockWait: a.wait })).pipe(Command.withDescription(
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
// unlock

/** The `unlock` command. */
export const unlock = Command.make("unlock", {
  id: sessionId,
  force: Flag.Boolean("force").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
      "Also remove a lock whose holder cannot be proved gone (another host, kernel or pid namespace); never one proved alive"
    )
  )
}, (a) =>
  withoutJournal(({ json, storage }) =>
    Effect.gen(function*() {
      yield* validId(a.id)
      if (!Storage.isFilesystem(storage)) {
        return yield* new NotAvailable({
          feature: "unlock",
          reason: "PostgreSQL sessions have no lock file (the server releases the locks of a lost connection)"
        })
      }
      const report = yield* NodePersistence.unlock(Storage.nodeOptions(storage), a.id, { force: a.force })
      if (json) return yield* Output.json(report)
      if (!report.removed) return yield* Output.write(`${a.id} has no lock; nothing removed\n`)
      const who = report.holder === null ? "an unreadable lock" : `the lock of ${Lock.describe(report.holder)}`
      yield* Output.write(
        report.forced
          ? `removed ${who} from ${a.id} by force: the holder was not proved gone (${report.proof}); ` +
            `if it still runs, it stops before its next write\n`
          : `removed ${who} from ${a.id}: its holder is gone (${report.proof})\n`
      )
    })
  )).pipe(Command.withDescription(
    "Remove a session's stale lock, only when its holder is proved gone; refuses (exit 4) while it is alive or unknown"
  ))
