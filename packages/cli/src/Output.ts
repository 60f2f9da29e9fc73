/**
 * What the command writes: results on stdout (human text, or JSON with `--json`),
 * failures and progress on stderr. A progress bar is drawn only when stderr is a
 * terminal, so piped and redirected output carries nothing extra.
 *
 * @since 0.1.0
 */
import { Entry, JournalState } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { format } from "node:util"
import { OutputFailed } from "./Failure.ts"
import * as ProcessStreams from "./internal/processStreams.ts"

const outputFailed = (e: unknown): OutputFailed => {
  const code = typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined
  const reason = messageOf(e)
  return new OutputFailed(code === undefined ? { reason } : { code, reason })
}

/**
 * Where a command's `Console` writes: stdout and stderr as they are (no newline
 * added), and whether each is a terminal (its width when it is).
 *
 * @since 0.1.0
 */
export interface Streams {
  /** Writes to stdout and calls `done` once the write did, with the error when it failed. */
  readonly stdout: (data: string | Uint8Array, done: (error?: unknown) => void) => void
  /** Writes to stderr. */
  readonly stderr: (text: string) => void
  /** The width of stdout when it is a terminal, else undefined. */
  readonly stdoutColumns: () => number | undefined
  /** The width of stderr when it is a terminal, else undefined. */
  readonly stderrColumns: () => number | undefined
}

const StreamsKey: unique symbol = Symbol.for("@session-journal/cli/Output/Streams")

interface StreamsConsole extends Console.Console {
  readonly [StreamsKey]: Streams
}

const streamsOf = (console: Console.Console): Streams | undefined =>
  StreamsKey in console ? (console as StreamsConsole)[StreamsKey] : undefined

/**
 * Effect's `Console` over `streams`: `log`, `info`, `debug`, `dir` and `table`
 * write a line to stdout, `error`, `warn` and `trace` one to stderr. The command's
 * own writes (`write`, `errorLine`, the progress bar) reach `streams` through it
 * as they are, so a write to stdout still reports its failure.
 *
 * @since 0.1.0
 */
export const makeConsole = (streams: Streams): Console.Console => {
  const out = (...args: ReadonlyArray<unknown>) => {
    // A failure here (help text) is the process's to report (`internal/runCli.ts`).
    streams.stdout(format(...args) + "\n", () => {})
  }
  const err = (...args: ReadonlyArray<unknown>) => streams.stderr(format(...args) + "\n")
  const counts = new Map<string, number>()
  const console: StreamsConsole = {
    [StreamsKey]: streams,
    assert: (condition, ...args) => {
      if (!condition) err("Assertion failed", ...args)
    },
    clear: () => {},
    count: (label = "default") => {
      const n = (counts.get(label) ?? 0) + 1
      counts.set(label, n)
      out(`${label}: ${n}`)
    },
    countReset: (label = "default") => {
      counts.delete(label)
    },
    debug: out,
    dir: (item) => out(item),
    dirxml: out,
    error: err,
    group: out,
    groupCollapsed: out,
    groupEnd: () => {},
    info: out,
    log: out,
    table: (data) => out(data),
    time: () => {},
    timeEnd: () => {},
    timeLog: () => {},
    trace: err,
    warn: err
  }
  return console
}

/**
 * The process's stdout and stderr as `Streams` (`internal/processStreams.ts`, the
 * one module that writes to them).
 *
 * @since 0.1.0
 */
export const processStreams: Streams = {
  stdout: ProcessStreams.writeStdout,
  stderr: ProcessStreams.writeStderr,
  stdoutColumns: ProcessStreams.stdoutColumns,
  stderrColumns: ProcessStreams.stderrColumns
}

/**
 * The command's `Console` on the process's stdout and stderr.
 *
 * @since 0.1.0
 */
export const processConsole: Console.Console = makeConsole(processStreams)

/**
 * Runs `effect` with the process's `Console` unless its `Console` already is one
 * made by `makeConsole` (an in-process run's capture).
 *
 * @since 0.1.0
 */
export const withCommandConsole = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Console.consoleWith((console) =>
    streamsOf(console) !== undefined ? effect : Effect.provideService(effect, Console.Console, processConsole)
  )

/**
 * The streams of the current `Console`; a `Console` not made by `makeConsole`
 * gets its text through `log` and `error`, a line at a time.
 *
 * @since 0.1.0
 */
export const streams: Effect.Effect<Streams> = Console.consoleWith((console) =>
  Effect.succeed(
    streamsOf(console) ?? {
      stdout: (data, done) => {
        const text = typeof data === "string" ? data : new TextDecoder().decode(data)
        console.log(text.endsWith("\n") ? text.slice(0, -1) : text)
        done()
      },
      stderr: (text) => console.error(text.endsWith("\n") ? text.slice(0, -1) : text),
      stdoutColumns: () => undefined,
      stderrColumns: () => undefined
    }
  )
)

/**
 * `n` and a noun, the noun in the plural unless `n` is 1: `1 call`, `2 calls`
 * (`plural` for a noun whose plural is not the noun and an `s`).
 *
 * @since 0.1.0
 */
export const count = (n: number | bigint, noun: string, plural = `${noun}s`): string =>
  `${n} ${n === 1 || n === 1n ? noun : plural}`

/**
 * Writes text to stdout (through the `Console`) as it is (the caller supplies
 * newlines) and completes once the write did, failing with `OutputFailed` when it
 * failed (a full disk, a closed file). On Linux, writes to pipes and files are
 * synchronous, so output is never lost at exit. A closed pipe (EPIPE) ends the
 * process with 0 before this fails (see `internal/runCli.ts`).
 *
 * @since 0.1.0
 */
export const write = (text: string): Effect.Effect<void, OutputFailed> => text.length === 0 ? Effect.void : bytes(text)

/**
 * Writes bytes (or text) to stdout, as `write` does.
 *
 * @since 0.1.0
 */
export const bytes = (data: string | Uint8Array): Effect.Effect<void, OutputFailed> =>
  Effect.flatMap(streams, (s) =>
    Effect.callback<void, OutputFailed>((resume) => {
      s.stdout(data, (error) => resume(error == null ? Effect.void : Effect.fail(outputFailed(error))))
    }))

/**
 * Writes lines to stdout, each followed by a newline, in one write.
 *
 * @since 0.1.0
 */
export const lines = (items: ReadonlyArray<string>): Effect.Effect<void, OutputFailed> =>
  items.length === 0 ? Effect.void : write(items.join("\n") + "\n")

/**
 * Writes one JSON document (a line) to stdout.
 *
 * @since 0.1.0
 */
export const json = (value: unknown): Effect.Effect<void, OutputFailed> => write(JSON.stringify(value) + "\n")

/**
 * Writes one line to stderr (through the `Console`).
 *
 * @since 0.1.0
 */
export const errorLine = (text: string): Effect.Effect<void> =>
  Effect.flatMap(streams, (s) => Effect.sync(() => s.stderr(text.endsWith("\n") ? text : text + "\n")))

/**
 * The width of stdout when it is a terminal (tables and charts are drawn only
 * there); undefined when it is not.
 *
 * @since 0.1.0
 */
export const stdoutColumns: Effect.Effect<number | undefined> = Effect.map(streams, (s) => s.stdoutColumns())

/**
 * A progress bar on stderr. All methods do nothing when stderr is not a terminal.
 *
 * @since 0.1.0
 */
export interface Progress {
  /** Sets the total, when it becomes known. */
  readonly total: (n: number) => void
  /** Advances by `n` units. */
  readonly advance: (n: number) => void
  /** Erases the bar. */
  readonly done: () => void
}

/**
 * Starts a progress bar labelled `label` on the stderr of `streams`; `total` may be
 * unknown (0) at first. Redraws at most every 100 ms of `clock` (the bar's methods
 * are plain callbacks, so the clock is given once, when it starts).
 *
 * @since 0.1.0
 */
export const progress = (streams: Streams, label: string, total: number, clock: Clock.Clock): Progress => {
  if (streams.stderrColumns() === undefined) return { total: () => {}, advance: () => {}, done: () => {} }
  let max = total
  let current = 0
  let last = 0
  let drawn = false
  const draw = (force: boolean) => {
    const now = clock.currentTimeMillisUnsafe()
    if (!force && now - last < 100) return
    last = now
    const columns = Math.max(40, streams.stderrColumns() ?? 80)
    const width = Math.min(40, columns - label.length - 24)
    const ratio = max > 0 ? Math.min(1, current / max) : 0
    const filled = Math.round(ratio * width)
    const bar = max > 0 ? `[${"#".repeat(filled)}${" ".repeat(width - filled)}] ${Math.floor(ratio * 100)}%` : ""
    streams.stderr(`\r\x1b[2K${label} ${bar} ${current}${max > 0 ? `/${max}` : ""}`)
    drawn = true
  }
  return {
    total: (n) => {
      max = n
      draw(true)
    },
    advance: (n) => {
      current += n
      draw(false)
    },
    done: () => {
      if (drawn) streams.stderr("\r\x1b[2K")
      drawn = false
    }
  }
}

/**
 * Runs `f` with a progress bar that is erased however `f` ends.
 *
 * @since 0.1.0
 */
export const withProgress = <A, E, R>(
  label: string,
  total: number,
  f: (p: Progress) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.zipWith(streams, Clock.Clock, (s, clock) => progress(s, label, total, clock)),
    f,
    (p) => Effect.sync(() => p.done())
  )

/**
 * An entry as its JSON line (the stored form, with `kind`).
 *
 * @since 0.1.0
 */
export const entryJson = (entry: Entry.Entry): string => JSON.stringify(Entry.encode(entry))

/**
 * An entry as its JSON value (the stored form, with `kind`).
 *
 * @since 0.1.0
 */
export const entryJsonValue = (entry: Entry.Entry): Record<string, unknown> => ({ ...Entry.encode(entry) })

const isoSeconds = (secs: number): string => {
  const d = new Date(secs * 1000)
  return Number.isNaN(d.getTime()) ? String(secs) : d.toISOString().replace(".000Z", "Z")
}

const clip = (s: string, max: number): string => s.length <= max ? s : `${s.slice(0, max - 1)}…`

/**
 * An entry as one human-readable line.
 *
 * @since 0.1.0
 */
export const entryText = (entry: Entry.Entry): string => {
  const head = `#${entry.sequence} ${isoSeconds(entry.timestamp_secs)}`
  if (Entry.isTool(entry)) {
    return `${head} tool ${entry.tool_name} ${entry.server_id}/${entry.agent_id} read=${entry.bytes_read} written=${entry.bytes_written} depth=${entry.delegation_depth} ${
      entry.allowed ? "allowed" : "DENIED"
    } ${entry.entry_hash.slice(0, 12)}`
  }
  return `${head} ${entry.kind} ${clip(JSON.stringify(entry.payload), 160)} ${entry.entry_hash.slice(0, 12)}`
}

/**
 * An entry in the chosen output mode.
 *
 * @since 0.1.0
 */
export const entryLine = (asJson: boolean) => (entry: Entry.Entry): string =>
  asJson ? entryJson(entry) : entryText(entry)

/**
 * The `stats` document: the chio snapshot fields, then `message_count`,
 * `next_sequence` and `meta`.
 *
 * @since 0.1.0
 */
export const statsJson = (state: JournalState.JournalState) => ({
  ...JournalState.snapshotToJson(JournalState.snapshot(state)),
  message_count: JournalState.counterToJson(state.message_count),
  next_sequence: state.next_sequence,
  meta: state.meta
})

/**
 * A horizontal bar chart of counts, largest first, fitted to `columns`.
 *
 * @since 0.1.0
 */
export const barChart = (rows: ReadonlyArray<readonly [string, bigint]>, columns: number): Array<string> => {
  const sorted = [...rows].sort((a, b) => (a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : a[0] < b[0] ? -1 : 1))
  if (sorted.length === 0) return []
  const labelWidth = Math.min(24, Math.max(...sorted.map(([k]) => k.length)))
  const max = sorted[0]![1] > 0n ? sorted[0]![1] : 1n
  const countWidth = String(max).length
  const width = Math.max(10, Math.min(50, columns - labelWidth - countWidth - 4))
  return sorted.map(([name, n]) => {
    const len = Number((n * BigInt(width)) / max)
    return `${clip(name, labelWidth).padEnd(labelWidth)} ${
      "█".repeat(Math.max(n > 0n ? 1 : 0, len)).padEnd(width)
    } ${n}`
  })
}

/**
 * Left-aligned columns, separated by two spaces.
 *
 * @since 0.1.0
 */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const fmt = (r: ReadonlyArray<string>) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")
  return [fmt(header), ...rows.map(fmt)]
}
