/**
 * What a page's live events send of the shared live header (`LiveGate`): a
 * header only after the entry it ends with was sent with the same hash (or the
 * page showed it), never one of another history; a header ahead of the rows is
 * sent once they reach it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, JournalState } from "@session-journal/core"
import * as fc from "fast-check"
import * as LiveGate from "../src/viewer/LiveGate.ts"

const params = (tool_name: string): Entry.ValidToolParams => ({
  tool_name,
  server_id: "s",
  agent_id: "a",
  bytes_read: 0,
  bytes_written: 0,
  delegation_depth: 0,
  allowed: true
})

// A chain of `n` entries whose first `shared` are `base`'s, the rest its own.
const chain = (n: number, name: string, base: ReadonlyArray<Entry.Entry> = [], shared = 0): Array<Entry.Entry> => {
  const entries = base.slice(0, shared)
  let state = JournalState.foldAll(JournalState.empty("g"), entries)
  for (let i = entries.length; i < n; i++) {
    const e = JournalState.nextTool(state, 100 + i, params(`${name}${i}`))
    entries.push(e)
    state = JournalState.fold(state, e)
  }
  return entries
}

const snapshotOf = (e: Entry.Entry | null, stopped: string | null = null): LiveGate.Snapshot => ({
  entries: e === null ? 0 : e.sequence + 1,
  last: e?.sequence ?? null,
  lastHash: e?.entry_hash ?? null,
  html: "",
  stopped
})
const render = (s: LiveGate.Snapshot) => `O ${s.last} ${s.lastHash}\n`
const entryItem = (e: Entry.Entry): LiveGate.Item => ({
  _tag: "Entry",
  entry: e,
  text: `E ${e.sequence} ${e.entry_hash}\n`
})
const overview = (s: LiveGate.Snapshot): LiveGate.Item => ({ _tag: "Overview", snapshot: s })

describe("LiveGate", () => {
  it("property: every header sent ends with an entry sent before it with the same hash; the newest of the rows' history is sent", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.nat(),
        fc.nat(),
        fc.boolean(),
        fc.array(fc.record({ other: fc.boolean(), at: fc.nat(), after: fc.nat() }), { maxLength: 12 }),
        (n, sharedSeed, fromSeed, withAnchor, headers) => {
          const rows = chain(n, "a")
          const other = chain(n + 5, "b", rows, sharedSeed % n)
          const from = fromSeed % (n + 1)
          const anchor = withAnchor && from > 0 ? { sequence: from - 1, hash: rows[from - 1]!.entry_hash } : null
          // The rows from `from` on, with headers of either history put in among them.
          const items: Array<LiveGate.Item> = rows.slice(from).map(entryItem)
          const placed = headers.map((h) => {
            const source = h.other ? other : rows
            return { snapshot: snapshotOf(source[h.at % source.length]!), after: h.after % (items.length + 1) }
          })
          for (const p of placed.slice().sort((x, y) => y.after - x.after)) {
            items.splice(p.after, 0, overview(p.snapshot))
          }
          const gate = LiveGate.gate(anchor, render)
          const sent = new Map<number, string>(anchor === null ? [] : [[anchor.sequence, anchor.hash]])
          const headersSent: Array<string> = []
          for (const item of items) {
            for (const line of gate(item).split("\n").filter((l) => l.length > 0)) {
              const [kind, seq, hash] = line.split(" ")
              if (kind === "E") sent.set(Number(seq), hash!)
              else {
                assert.strictEqual(sent.get(Number(seq)), hash, `header ${seq} of another history, or before its row`)
                headersSent.push(line)
              }
            }
          }
          // The last header, when it is of the rows' history and within what the page has, is sent.
          const lastHeader = [...items].reverse().find((i) => i._tag === "Overview")
          if (lastHeader?._tag === "Overview") {
            const s = lastHeader.snapshot
            if (sent.get(s.last!) === s.lastHash) assert.include(headersSent, render(s).trimEnd())
          }
        }
      ),
      { numRuns: 300 }
    )
  })

  it("a header that counts nothing is sent before any row, or when it says why it stopped", () => {
    const rows = chain(2, "a")
    const gate = LiveGate.gate(null, render)
    assert.strictEqual(gate(overview(snapshotOf(null))), render(snapshotOf(null)))
    gate(entryItem(rows[0]!))
    assert.strictEqual(gate(overview(snapshotOf(null))), "")
    assert.strictEqual(gate(overview(snapshotOf(null, "gone"))), render(snapshotOf(null, "gone")))
  })

  it("a header ahead of the rows waits for them; one of another history at the same place is never sent", () => {
    const rows = chain(4, "a")
    const other = chain(4, "b", rows, 1)
    const gate = LiveGate.gate({ sequence: 0, hash: rows[0]!.entry_hash }, render)
    assert.strictEqual(gate(overview(snapshotOf(rows[2]!))), "")
    assert.strictEqual(gate(entryItem(rows[1]!)), `E 1 ${rows[1]!.entry_hash}\n`)
    assert.strictEqual(gate(entryItem(rows[2]!)), `E 2 ${rows[2]!.entry_hash}\n` + render(snapshotOf(rows[2]!)))
    assert.strictEqual(gate(overview(snapshotOf(other[3]!))), "")
    assert.strictEqual(gate(entryItem(rows[3]!)), `E 3 ${rows[3]!.entry_hash}\n`)
    assert.strictEqual(gate(overview(snapshotOf(other[2]!))), "")
  })
})
