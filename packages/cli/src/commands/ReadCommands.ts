/**
 * The commands that read: `list`, `show`, `stats`, `tail`, `export`.
 */
import { Hook as CodexHook } from "@session-journal/codex"
import { type Follow, JournalState, SessionJournal } from "@session-journal/core"
import { Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { nonNegative, sessionId, withJournalToRead } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import * as Denials from "../viewer/Denials.ts"
import * as ReportModel from "../viewer/ReportModel.ts"
import * as Stories from "../viewer/Stories.ts"

// ---------------------------------------------------------------------------
// list / show / stats / tail / export

/** The `list` command. */
export const list = Command.make("list", {}, () =>
  withJournalToRead(({ json, storage }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const sessions = yield* journal.list
      const updated = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
      // The journal sessions of one agent session (hooked, custody, store) are one story.
      const { byId, stories } = yield* Stories.collect(sessions.map((s) => s.id))
      if (json) {
        return yield* Output.json({
          sessions: sessions.map((s) => ({
            id: s.id,
            ...(byId.has(s.id) ? { agent_session: byId.get(s.id)!.agentSession, role: byId.get(s.id)!.role } : {}),
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
      if (sessions.length === 0) return yield* Output.write(`no sessions in ${Storage.describe(storage)}\n`)
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
      if (stories.size > 0) {
        yield* Output.lines([
          "",
          "Claude Code sessions (each one story: its hooked session, custody of its transcripts, its store copy):",
          ...[...stories].map(([agentSession, members]) => `${agentSession}  ${Stories.line(members)}`)
        ])
      }
    })
  )).pipe(
    Command.withDescription("List sessions: id, entries, head, updated, bytes on disk; damaged sessions are marked")
  )

/** The `show` command. */
export const show = Command.make("show", {
  id: sessionId,
  from: nonNegative("from").pipe(Flag.withDefault(0), Flag.withDescription("First sequence to show")),
  limit: nonNegative("limit").pipe(Flag.optional, Flag.withDescription("Most entries to show"))
}, (a) =>
  withJournalToRead(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const fmt = Output.entryLine(json)
      yield* journal.entries(a.id, { from: a.from, limit: Option.getOrUndefined(a.limit) }).pipe(
        Stream.runForEachArray((chunk) => Output.lines(chunk.map(fmt)))
      )
    })
  )).pipe(Command.withDescription("Print entries from the full history"))

/** The `stats` command. */
export const stats = Command.make("stats", {
  id: sessionId,
  denials: Flag.Boolean("denials").pipe(
    Flag.withDefault(true),
    Flag.withDescription(
      "Count the denied calls and their guards, one pass over the history (--no-denials: the snapshot alone)"
    )
  )
}, (a) =>
  withJournalToRead(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const state = yield* journal.state(a.id)
      // One pass over the history for the denials and their guards (bounded memory).
      const tally = Denials.tally()
      const unread = !a.denials ? "not counted (--no-denials)" : yield* journal.entries(a.id).pipe(
        Stream.runForEachArray((chunk) => Effect.sync(() => chunk.forEach(tally.add))),
        Effect.as(null),
        Effect.catch((e) => Effect.succeed(e.message || e._tag))
      )
      const denials = tally.result()
      const related = ReportModel.relatedSessions(state.meta)
      // The other journal sessions of the same agent session, whichever this one is.
      const found = yield* Stories.storyOf(a.id, state.meta)
      const member = found?.member ?? null
      const story = found?.members ?? null
      const countedIn = yield* ReportModel.countedIn(state.meta)
      const custodyExists = related.custody === null ? false : yield* ReportModel.exists(related.custody)
      const hooked = state.meta?.labels?.includes("hooked") === true
      const doc = {
        ...Output.statsJson(state),
        denials: unread !== null
          ? null
          : {
            denied: denials.denied,
            by_guard: denials.byGuard.map(([guard, count]) => ({ guard, count })),
            unguarded: denials.unguarded
          },
        counted_in: countedIn,
        hooked_session: related.hooked,
        custody_session: related.custody,
        custody_archived: related.custody === null ? null : custodyExists,
        agent_session: member === null ? null : {
          id: member.agentSession,
          role: member.role,
          sessions: (story ?? []).map((m) => ({ id: m.id, role: m.role, sub_agent: m.subAgent }))
        }
      }
      if (json) return yield* Output.json(doc)
      const df = doc.data_flow
      const out = [
        `session          ${doc.session_id}`,
        `entries          ${state.next_sequence} (${doc.entry_count} retained)`,
        `head             ${doc.head_hash}`,
        `invocations      ${df.total_invocations}`,
        `messages         ${doc.message_count}`,
        `bytes read       ${df.total_bytes_read}`,
        `bytes written    ${df.total_bytes_written}${
          hooked ? " (a Claude Code call's input counts as the JSON text of its tool_input)" : ""
        }`,
        `max depth        ${df.max_delegation_depth}`,
        `streak           ${doc.current_streak_tool ?? "-"} x${doc.current_streak_len}`
      ]
      if (!a.denials) out.push(`denied           - (not counted: --no-denials)`)
      else if (unread !== null) out.push(`denied           - (the history could not be read: ${unread})`)
      else {
        out.push(`denied           ${denials.denied}`)
        for (const [guard, n] of denials.byGuard) out.push(`denied by        ${guard} ${n}`)
        if (denials.unguarded > 0) out.push(`denied by        (no guard recorded) ${denials.unguarded}`)
      }
      if (countedIn !== null) {
        out.push(
          `counted in       ${countedIn} (it decided these calls; the tool entries here are copies from the transcript, not more calls)`
        )
      }
      if (related.custody !== null) {
        out.push(
          `custody          ${related.custody}${
            custodyExists
              ? ""
              : ` (not archived yet: \`session-journal ${
                related.custody.startsWith(CodexHook.ROLLOUT_PREFIX) ? "codex" : "claude-code"
              } archive\` makes it)`
          }`
        )
      }
      if (member !== null && story !== null) {
        out.push(`agent session    ${member.agentSession} (this is its ${member.role} session)`)
        out.push(`one story        ${Stories.line(story)}`)
      }
      if (state.meta !== null) {
        if (state.meta.title !== undefined) out.push(`title            ${state.meta.title}`)
        if (state.meta.labels !== undefined) out.push(`labels           ${state.meta.labels.join(", ")}`)
      }
      const counts = Array.from(JournalState.snapshot(state).tool_counts)
      const columns = yield* Output.stdoutColumns
      if (columns !== undefined && counts.length > 0) {
        out.push("", "tool calls")
        out.push(...Output.barChart(counts, columns))
      } else {
        for (const [name, n] of counts.sort((x, y) => (x[0] < y[0] ? -1 : 1))) out.push(`tool_count       ${name} ${n}`)
      }
      yield* Output.lines(out)
    })
  )).pipe(Command.withDescription(
    "Snapshot counters, message count, denials with their guards, metadata, and which session counts the calls; a bar chart on a terminal"
  ))

/** The `tail` command. */
export const tail = Command.make("tail", {
  id: sessionId,
  lines: nonNegative("lines").pipe(
    Flag.withAlias("n"),
    Flag.withDefault(10),
    Flag.withDescription("How many of the last entries to print first")
  ),
  follow: Flag.Boolean("follow").pipe(
    Flag.withAlias("f"),
    Flag.withDefault(false),
    Flag.withDescription("Keep printing entries written later, by any process")
  )
}, (a) =>
  withJournalToRead(({ json }) =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const fmt = Output.entryLine(json)
      if (!a.follow) {
        const state = yield* journal.state(a.id)
        const from = Math.max(0, state.next_sequence - a.lines)
        return yield* journal.entries(a.id, { from }).pipe(
          Stream.runForEachArray((chunk) => Output.lines(chunk.map(fmt)))
        )
      }
      // Every entry followed is checked against the one printed before it; a repair
      // that set printed entries aside is said on stderr before its recovery entry,
      // and history printed that was replaced otherwise ends the command (exit 1).
      // The follower loads the session once, and starts at its last `lines` entries.
      yield* journal.follow(a.id, { last: a.lines }).pipe(
        Stream.runForEachArray((chunk) =>
          Effect.forEach(chunk, (event) =>
            event._tag === "Entry"
              ? Output.lines([fmt(event.entry)])
              : Effect.andThen(
                Output.errorLine(`session-journal: ${recoveredLine(a.id, event)}`),
                Output.lines([fmt(event.entry)])
              ), { discard: true })
        )
      )
    })
  )).pipe(Command.withDescription(
    "Print the last entries; --follow keeps printing new ones from other processes, each checked against the one before it"
  ))

// One line saying which printed entries a repair set aside.
const recoveredLine = (id: string, event: Follow.Recovered): string => {
  const { from, to } = event.replaced
  const range = from === to ? `entry ${from}` : `entries ${from}..${to}`
  return `session ${id} was repaired: ${range} printed above ${
    from === to ? "is" : "are"
  } no longer part of it; its recovery entry ${event.entry.sequence} follows`
}

/** The `exportCmd` command. */
export const exportCmd = Command.make("export", {
  id: sessionId,
  format: Flag.Literals("format", ["jsonl", "json"]).pipe(
    Flag.withDefault("jsonl" as const),
    Flag.withDescription("jsonl (one entry a line) or json (one array)")
  )
}, (a) =>
  withJournalToRead(() =>
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
    })
  )).pipe(Command.withDescription("Write the full history to stdout"))
