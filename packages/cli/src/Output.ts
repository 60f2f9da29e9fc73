/**
 * What the command writes: results on stdout (human text, or JSON with `--json`),
 * failures and progress on stderr. A progress bar is drawn only when stderr is a
 * terminal, so piped and redirected output carries nothing extra.
 *
 * @since 0.1.0
 */
import { Entry, JournalState } from "@session-journal/core"
import * as Effect from "effect/Effect"
import { OutputFailed } from "./Failure.ts"

const outputFailed = (e: unknown): OutputFailed => {
  const code = typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined
  const reason = e instanceof Error ? e.message : String(e)
  return new OutputFailed(code === undefined ? { reason } : { code, reason })
}

/**
 * Writes text to stdout as it is (the caller supplies newlines) and completes
 * once the write did, failing with `OutputFailed` when it failed (a full disk,
 * a closed file). On Linux, writes to pipes and files are synchronous, so output
 * is never lost at exit. A closed pipe (EPIPE) ends the process with 0 before
 * this fails (see `main.ts`).
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
  Effect.callback<void, OutputFailed>((resume) => {
    try {
      process.stdout.write(data, (error) => resume(error == null ? Effect.void : Effect.fail(outputFailed(error))))
    } catch (e) {
      resume(Effect.fail(outputFailed(e)))
    }
  })

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
 * Writes one line to stderr.
 *
 * @since 0.1.0
 */
export const errorLine = (text: string): Effect.Effect<void> =>
  Effect.sync(() => {
    process.stderr.write(text.endsWith("\n") ? text : text + "\n")
  })

/**
 * Whether stdout is a terminal (tables and charts are drawn only there).
 *
 * @since 0.1.0
 */
export const stdoutIsTerminal = (): boolean => process.stdout.isTTY === true

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
 * Starts a progress bar labelled `label`; `total` may be unknown (0) at first.
 * Redraws at most every 100 ms.
 *
 * @since 0.1.0
 */
export const progress = (label: string, total = 0): Progress => {
  const stream = process.stderr
  if (stream.isTTY !== true) return { total: () => {}, advance: () => {}, done: () => {} }
  let max = total
  let current = 0
  let last = 0
  let drawn = false
  const draw = (force: boolean) => {
    const now = Date.now()
    if (!force && now - last < 100) return
    last = now
    const columns = Math.max(40, stream.columns || 80)
    const width = Math.min(40, columns - label.length - 24)
    const ratio = max > 0 ? Math.min(1, current / max) : 0
    const filled = Math.round(ratio * width)
    const bar = max > 0 ? `[${"#".repeat(filled)}${" ".repeat(width - filled)}] ${Math.floor(ratio * 100)}%` : ""
    stream.write(`\r\x1b[2K${label} ${bar} ${current}${max > 0 ? `/${max}` : ""}`)
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
      if (drawn) stream.write("\r\x1b[2K")
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
    Effect.sync(() => progress(label, total)),
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
