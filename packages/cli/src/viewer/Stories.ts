/**
 * One story per agent session. A Claude Code session is recorded as up to
 * three kinds of journal session: the hooked session (`cch-…`, its calls as
 * they were decided), the custody of its transcripts (`cc-…`, one per main or
 * sub-agent transcript) and the Agent SDK store's copy (`ccs-…`). Each names the
 * agent's own session id in its metadata (`data.claude_code_session`,
 * `data.claude_session_id`, `data.session_store.session_id`); grouped under that
 * id, any of them finds the others. `memberOf` and `group` are pure; `collect`
 * reads the metadata of every session once. `list` and the viewer's list page
 * group with them.
 *
 * @since 0.1.0
 */
import type { SessionMeta } from "@session-journal/core"
import { SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/**
 * What a journal session is of an agent session.
 *
 * @since 0.1.0
 */
export type Role = "hooked" | "custody" | "store"

/**
 * A journal session as a member of an agent session's story.
 *
 * @since 0.1.0
 */
export interface Member {
  readonly id: string
  /** The agent's own session id. */
  readonly agentSession: string
  readonly role: Role
  /** The sub-agent whose transcript it holds, when it holds one's. */
  readonly subAgent: string | null
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const str = (v: unknown): string | null => (typeof v === "string" && v.length > 0 ? v : null)

/**
 * What session `id` is of an agent session, from its metadata; null when it
 * names none.
 *
 * @since 0.1.0
 */
export const memberOf = (id: string, meta: SessionMeta.SessionMeta | null): Member | null => {
  const data = meta?.data
  if (!isRecord(data)) return null
  const hooked = str(data["claude_code_session"])
  if (hooked !== null) return { id, agentSession: hooked, role: "hooked", subAgent: null }
  const custody = str(data["claude_session_id"])
  if (custody !== null) {
    return {
      id,
      agentSession: custody,
      role: "custody",
      subAgent: data["transcript"] === "subagent" ? str(data["agent_id"]) : null
    }
  }
  const store = data["session_store"]
  const stored = isRecord(store) ? str(store["session_id"]) : null
  if (stored !== null) {
    return { id, agentSession: stored, role: "store", subAgent: isRecord(store) ? str(store["subpath"]) : null }
  }
  return null
}

/**
 * Journal sessions grouped into stories: the members of each agent session, by
 * its id, and what each journal session is.
 *
 * @since 0.1.0
 */
export interface Grouped {
  readonly stories: Map<string, Array<Member>>
  readonly byId: Map<string, Member>
}

/**
 * Groups members under their agent session, each story's members in the order
 * given (the journal's); null (a session of no agent session) is skipped.
 *
 * @since 0.1.0
 */
export const group = (members: Iterable<Member | null>): Grouped => {
  const stories = new Map<string, Array<Member>>()
  const byId = new Map<string, Member>()
  for (const member of members) {
    if (member === null) continue
    byId.set(member.id, member)
    const list = stories.get(member.agentSession)
    if (list === undefined) stories.set(member.agentSession, [member])
    else list.push(member)
  }
  return { stories, byId }
}

/**
 * The members of each agent session, by its id, in the order the journal lists
 * them; and what each journal session is (`group`). A session whose state
 * cannot be read belongs to none.
 *
 * @since 0.1.0
 */
export const collect = (ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const members: Array<Member | null> = []
    for (const id of ids) {
      const state = yield* Effect.option(journal.state(id))
      members.push(memberOf(id, Option.isSome(state) ? state.value.meta : null))
    }
    return group(members)
  })

/**
 * The story of session `id` from its metadata: what it is of its agent session
 * and every member of that agent session in the journal (one read of each
 * session's metadata, done only when `id` is a member); null when it is of none.
 *
 * @since 0.1.0
 */
export const storyOf = (id: string, meta: SessionMeta.SessionMeta | null) =>
  Effect.gen(function*() {
    const member = memberOf(id, meta)
    if (member === null) return null
    const journal = yield* SessionJournal.SessionJournal
    const all = (yield* collect((yield* journal.list).map((s) => s.id))).stories.get(member.agentSession)
    return { member, members: all ?? [member] }
  })

/**
 * The roles in the order a story shows its members.
 *
 * @since 0.1.0
 */
export const ROLES: ReadonlyArray<Role> = ["hooked", "custody", "store"]

/**
 * A story's members in the order it shows them: by role (`ROLES`), the main
 * session's before its sub-agents', otherwise as given.
 *
 * @since 0.1.0
 */
export const ordered = (members: ReadonlyArray<Member>): Array<Member> => {
  const rank = (m: Member) => ROLES.indexOf(m.role) * 2 + (m.subAgent === null ? 0 : 1)
  return members.map((m, i) => ({ m, i })).sort((a, b) => rank(a.m) - rank(b.m) || a.i - b.i).map((x) => x.m)
}

/**
 * What a member is of its story, in a few words: its role, and the sub-agent
 * whose transcript it holds.
 *
 * @since 0.1.0
 */
export const roleText = (m: Member): string => m.subAgent === null ? m.role : `${m.role} · sub-agent ${m.subAgent}`

/**
 * A story as one line: each member's id after its role, sub-agents' transcripts
 * counted.
 *
 * @since 0.1.0
 */
export const line = (members: ReadonlyArray<Member>): string => {
  const parts: Array<string> = []
  for (const role of ROLES) {
    const of = members.filter((m) => m.role === role)
    const main = of.filter((m) => m.subAgent === null)
    const subs = of.length - main.length
    for (const m of main) parts.push(`${role} ${m.id}`)
    if (subs > 0) parts.push(`${main.length === 0 ? `${role} ` : ""}+${subs} sub-agent${subs === 1 ? "" : "s"}`)
  }
  return parts.join(" · ")
}
