/**
 * A tool call as one timeline row. The hooks write a call as up to three
 * entries: the tool entry, its decision in the same append (`Denials`: verdict,
 * guard, reason, `tool_use_id`, `tool_input`) and, later, its outcome
 * (`tool.outcome`: `duration_ms`, bytes read, error). A person reads one call:
 * the tool, the one line saying what it did (`CallLine`, from the decision's
 * `tool_input`), the verdict with its guard and reason, how long it took, the
 * bytes, the error, and the entries themselves on demand (`<details>`). The row
 * has the tool entry's id `eN`; the entries it holds keep theirs as anchors in
 * its first cell, so every `#eN` still finds its entry.
 *
 * Two ways to feed it, both bounded:
 * - `grouper` for a page written in order (the report, the viewer's window): a
 *   call's row is held until its outcome comes, for at most `MAX_HELD` rows and
 *   `MAX_HELD_CHARS` characters of rows written behind it and of the payloads of
 *   the calls held
 *   (then it is written as known so far, and a later outcome gets a row of its
 *   own that links to the call);
 * - `live` for entries arriving one by one (the viewer's live events): a call's
 *   row is sent at once and sent again, to replace it, when its decision and
 *   its outcome come; at most `MAX_LIVE` calls are remembered, with at most
 *   `MAX_HELD_CHARS` characters of decision payloads.
 *
 * @since 0.1.0
 */
import { Entry, Guard } from "@session-journal/core"
import * as CallLine from "./CallLine.ts"
import * as Denials from "./Denials.ts"
import * as Html from "./Html.ts"

/**
 * Rows a page holds back while calls wait for their outcomes.
 *
 * @since 0.1.0
 */
export const MAX_HELD = 512

/**
 * Characters of written rows, and of the payloads of held calls' entries, a page
 * holds back behind a call waiting for its outcome (rows can be large: a Write's
 * content is in its entries).
 *
 * @since 0.1.0
 */
export const MAX_HELD_CHARS = 8 * 1024 * 1024

/**
 * Calls the live events remember, for their decision and outcome to update them.
 *
 * @since 0.1.0
 */
export const MAX_LIVE = 1024

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const str = (v: unknown): string | null => (typeof v === "string" && v.length > 0 ? v : null)

/**
 * One call: its tool entry and, when known, its decision and its outcome.
 *
 * @since 0.1.0
 */
export interface Call {
  readonly tool: Entry.ToolEntry
  decision: Entry.Entry | null
  outcome: Entry.Entry | null
}

const payloadOf = (e: Entry.Entry | null): Record<string, unknown> =>
  e !== null && !Entry.isTool(e) && isRecord(e.payload) ? e.payload : {}

/**
 * What pairs the call with its outcome (`Denials.callKey` of its decision: the
 * agent's call id, else the tool entry's sequence), or null before its decision.
 *
 * @since 0.1.0
 */
export const useIdOf = (call: Call): string | null =>
  call.decision === null || Entry.isTool(call.decision) ? null : Denials.callKey(call.decision.payload)

// Whether the call's door records outcomes: its decision names what pairs one, and is
// the door's own entry. Core's own decision entry (`Guard.DECISION_KIND`) is written
// for a door that recorded nothing beside the call: no outcome of its calls is expected.
const recordsOutcomes = (call: Call): boolean =>
  call.decision !== null && call.decision.kind !== Guard.DECISION_KIND && useIdOf(call) !== null

const seconds = (
  ms: number
): string => (ms < 1000 ? `${ms} ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`)

/**
 * The row of a call.
 *
 * @since 0.1.0
 */
export const row = (call: Call): string => {
  const { tool, decision, outcome } = call
  const verdict = decision === null ? null : Denials.decisionOf(decision)
  const d = payloadOf(decision)
  const o = payloadOf(outcome)
  const denied = !tool.allowed || verdict?.verdict === "deny"
  const what = decision === null ? "" : CallLine.summary(tool.tool_name, d["tool_input"])
  const agent = tool.agent_id
  const facts: Array<string> = []
  facts.push(
    denied ? `<em>DENIED</em>` : verdict?.verdict === "ask" ? `<em>asked</em>` : `<em>allowed</em>`,
    ...(verdict?.guard == null ? [] : [`<i>by</i> <code class="guard">${Html.escape(verdict.guard)}</code>`]),
    ...(verdict?.reason == null ? [] : [Html.escape(verdict.reason)])
  )
  const parts = [facts.join(" ")]
  if (agent !== "main" && agent !== "") {
    const type = str(d["agent_type"])
    parts.push(
      `<i>agent</i> <code>${Html.escape(agent)}</code>${
        type === null ? "" : ` ${Html.escape(type)}`
      } · <i>depth</i> ${tool.delegation_depth}`
    )
  }
  if (outcome !== null) {
    const ms = o["duration_ms"]
    const took = typeof ms === "number" && Number.isSafeInteger(ms) && ms >= 0
      ? ms
      : (outcome.timestamp_secs - tool.timestamp_secs) * 1000
    parts.push(`<i>took</i> <span class="took">${seconds(took)}</span>`)
    const read = o["bytes_read"]
    parts.push(
      `<i>read</i> ${Html.bytes(typeof read === "number" ? read : 0)} · <i>written</i> ${
        Html.bytes(tool.bytes_written)
      }`
    )
    const error = str(o["error"])
    if (error !== null) {
      parts.push(
        `<span class="err">${o["is_interrupt"] === true ? "interrupted" : "error"}: ${
          Html.escape(error.split("\n")[0]!.slice(0, 300))
        }</span>`
      )
    }
  } else {
    parts.push(`<i>read</i> ${Html.bytes(tool.bytes_read)} · <i>written</i> ${Html.bytes(tool.bytes_written)}`)
    if (!denied && recordsOutcomes(call)) parts.push(`<span class="muted">no outcome recorded here</span>`)
  }
  const entries = [tool, decision, outcome].filter((e): e is Entry.Entry => e !== null)
  const raw = `<details class="raw"><summary class="muted">${entries.length === 1 ? "entry" : "entries"} ${
    entries.map((e) => e.sequence).join(", ")
  }</summary>${entries.map((e) => `<pre>${Html.escape(Html.jsonText(Entry.encode(e)))}</pre>`).join("")}</details>`
  const head = `<div><b>${Html.escape(tool.tool_name)}</b>${
    what === "" ? "" : ` <code class="what">${Html.escape(what)}</code>`
  }</div>`
  const anchors = entries.slice(1).map((e) => `<span id="e${e.sequence}"></span>`).join("")
  const attrs =
    `id="e${tool.sequence}" data-seq="${tool.sequence}" data-kind="tool" data-tool="${Html.escape(tool.tool_name)}" ` +
    `data-agent="${Html.escape(agent)}" data-verdict="${denied ? "deny" : "allow"}"`
  return `<tr ${attrs} class="call tool ${denied ? "denied" : "allowed"}">` +
    `<td><a href="#e${tool.sequence}">${tool.sequence}</a>${anchors}</td><td>${
      Html.isoSeconds(tool.timestamp_secs)
    }</td>` +
    `<td>call</td><td>${head}<div>${parts.join(" · ")}</div>${raw}</td>` +
    `<td title="${tool.entry_hash}">${Html.shortHash(tool.entry_hash)}</td></tr>`
}

/**
 * How an entry that is no part of a call is written (the timeline's `row`).
 *
 * @since 0.1.0
 */
export type RowOf = (entry: Entry.Entry) => string

// An outcome whose call is not in view: its own row, naming the call.
const outcomeRow = (rowOf: RowOf, entry: Entry.Entry, call: number | null): string => {
  const html = rowOf(entry)
  if (call === null) return html
  return html.replace(
    /<td><code>tool\.outcome<\/code><\/td><td>/,
    `<td><code>tool.outcome</code></td><td>↳ outcome of <a href="#e${call}">call ${call}</a> `
  )
}

// Where an entry goes: the call it completes, or none.
const decidedCall = (entry: Entry.Entry, calls: ReadonlyMap<number, Call>): Call | undefined => {
  const decision = Denials.decisionOf(entry)
  if (decision === null) return undefined
  const call = calls.get(decision.toolSequence ?? entry.sequence - 1)
  return call !== undefined && call.decision === null && call.outcome === null ? call : undefined
}

const outcomeUseId = (entry: Entry.Entry): string | null =>
  entry.kind === Entry.OUTCOME_KIND && !Entry.isTool(entry) ? Denials.callKey(entry.payload) : null

// Ids of the agent's calls, remembered past their rows, to name the call of a late outcome.
const rememberer = (bound: number) => {
  const seqOf = new Map<string, number>()
  return {
    set: (id: string, seq: number) => {
      seqOf.delete(id)
      seqOf.set(id, seq)
      if (seqOf.size > bound) seqOf.delete(seqOf.keys().next().value!)
    },
    get: (id: string) => seqOf.get(id) ?? null
  }
}

/**
 * Rows for entries written in order: `add` each entry, writing out what it
 * returns, then `end`.
 *
 * @since 0.1.0
 */
export interface Grouper {
  readonly add: (entry: Entry.Entry) => string
  readonly end: () => string
}

/**
 * A new grouper (see the module header).
 *
 * @since 0.1.0
 */
export const grouper = (rowOf: RowOf, maxHeld: number = MAX_HELD, maxChars: number = MAX_HELD_CHARS): Grouper => {
  // Rows in order: final HTML, or a call that may still get its decision or outcome.
  const held: Array<string | Call> = []
  let heldChars = 0 // of the written rows held, and of the entries the held calls hold
  const charged = new Map<Call, number>() // what each held call adds to heldChars
  const charge = (call: Call, entry: Entry.Entry) => {
    const n = Entry.isTool(entry) ? 0 : JSON.stringify(entry.payload).length
    charged.set(call, (charged.get(call) ?? 0) + n)
    heldChars += n
  }
  const open = new Map<number, Call>() // held calls by tool sequence
  const byUseId = new Map<string, Call>()
  const seen = rememberer(MAX_LIVE)
  let last: Call | null = null // the newest call, whose decision may follow it
  // Nothing more will join a call: its decision did not follow it (a writer other
  // than the hooks), it was denied, it has no id for an outcome, or its outcome came.
  const done = (call: Call) =>
    call !== last && (call.decision === null || !call.tool.allowed || call.outcome !== null ||
      useIdOf(call) === null || Denials.decisionOf(call.decision)?.verdict === "deny")
  const release = (all: boolean): string => {
    let out = ""
    while (held.length > 0) {
      const first = held[0]!
      if (typeof first !== "string") {
        if (!all && held.length <= maxHeld && heldChars <= maxChars && !done(first)) break
        open.delete(first.tool.sequence)
        const id = useIdOf(first)
        if (id !== null) byUseId.delete(id)
        heldChars -= charged.get(first) ?? 0
        charged.delete(first)
      }
      held.shift()
      if (typeof first === "string") heldChars -= first.length
      out += (typeof first === "string" ? first : row(first)) + "\n"
    }
    return out
  }
  return {
    add: (entry) => {
      last = null
      if (Entry.isTool(entry)) {
        const call: Call = { tool: entry, decision: null, outcome: null }
        held.push(call)
        open.set(entry.sequence, call)
        last = call
        return release(false)
      }
      const decided = decidedCall(entry, open)
      if (decided !== undefined) {
        decided.decision = entry
        charge(decided, entry)
        const id = useIdOf(decided)
        if (id !== null) {
          byUseId.set(id, decided)
          seen.set(id, decided.tool.sequence)
        }
        return release(false)
      }
      const useId = outcomeUseId(entry)
      const call = useId === null ? undefined : byUseId.get(useId)
      if (call !== undefined && call.outcome === null) {
        call.outcome = entry
        charge(call, entry)
        byUseId.delete(useId!)
        return release(false)
      }
      const html = useId === null ? rowOf(entry) : outcomeRow(rowOf, entry, seen.get(useId))
      held.push(html)
      heldChars += html.length
      return release(false)
    },
    end: () => release(true)
  }
}

/**
 * What a live event carries: the row, and the row it replaces (`replace`, the
 * tool entry's sequence) when it updates a call already sent.
 *
 * @since 0.1.0
 */
export interface LiveRow {
  readonly html: string
  readonly replace: number | null
}

/**
 * Rows for entries arriving one by one (see the module header).
 *
 * @since 0.1.0
 */
export const live = (
  rowOf: RowOf,
  maxChars: number = MAX_HELD_CHARS
): { readonly add: (entry: Entry.Entry) => LiveRow } => {
  const calls = new Map<number, Call>()
  const byUseId = new Map<string, Call>()
  let chars = 0 // of the payloads of the decisions remembered
  const charged = new Map<Call, number>()
  const forget = (call: Call) => {
    calls.delete(call.tool.sequence)
    const id = useIdOf(call)
    if (id !== null) byUseId.delete(id)
    chars -= charged.get(call) ?? 0
    charged.delete(call)
  }
  return {
    add: (entry) => {
      if (Entry.isTool(entry)) {
        const call: Call = { tool: entry, decision: null, outcome: null }
        calls.set(entry.sequence, call)
        if (calls.size > MAX_LIVE) forget(calls.values().next().value!)
        return { html: row(call), replace: null }
      }
      const decided = decidedCall(entry, calls)
      if (decided !== undefined) {
        decided.decision = entry
        const id = useIdOf(decided)
        if (id !== null) {
          byUseId.set(id, decided)
          const n = JSON.stringify(entry.payload).length
          charged.set(decided, n)
          chars += n
          // Past the bound the oldest calls are forgotten: their outcomes get rows of their own.
          // (Deleting the entry being visited is safe in a Map's iteration.)
          for (const oldest of calls.values()) {
            if (chars <= maxChars) break
            forget(oldest)
          }
        } else forget(decided)
        return { html: row(decided), replace: decided.tool.sequence }
      }
      const useId = outcomeUseId(entry)
      const call = useId === null ? undefined : byUseId.get(useId)
      if (call !== undefined && call.outcome === null) {
        call.outcome = entry
        forget(call)
        return { html: row(call), replace: call.tool.sequence }
      }
      return { html: rowOf(entry), replace: null }
    }
  }
}
