/**
 * Non-tool entries built from payloads the journal took over (`takePayload`):
 * hashed over the RFC 8785 text the walk made, their JSON text kept until the
 * storage that writes them takes it, so no payload is written out twice.
 */
import type * as Schema from "effect/Schema"
import type { Link, OtherEntry } from "../Entry.ts"
import type { Owned } from "./jcs.ts"
import { hashOther } from "./preimage.ts"

// The payload's JSON text of an entry built from a taken payload, until the
// entry's text is taken (`Entry.jsonText`, by the storage that writes it) or the
// entry is gone: a session holds no second copy of its window's payloads.
const texts = new WeakMap<OtherEntry, { readonly payload: Schema.Json; readonly text: string }>()

/** A non-tool entry of `payload`, hashed over `canonical`, its RFC 8785 text. */
export const make = (link: Link, kind: string, payload: Schema.Json, canonical: string): OtherEntry => ({
  sequence: link.sequence,
  prev_hash: link.prev_hash,
  entry_hash: hashOther(link.sequence, link.prev_hash, link.timestamp_secs, kind, canonical),
  timestamp_secs: link.timestamp_secs,
  kind,
  payload
})

/** A non-tool entry of a taken payload, its JSON text kept for `payloadText`. */
export const makeTaken = (link: Link, kind: string, taken: Owned): OtherEntry => {
  const entry = make(link, kind, taken.value, taken.canonical)
  texts.set(entry, { payload: taken.value, text: taken.text })
  return entry
}

/**
 * The JSON text (`toJsonText`) of the payload of an entry `makeTaken` built, while
 * it is kept and the entry still holds that payload; `take` lets it go.
 */
export const payloadText = (entry: OtherEntry, take: boolean): string | undefined => {
  const kept = texts.get(entry)
  if (kept === undefined || kept.payload !== entry.payload) return undefined
  if (take) texts.delete(entry)
  return kept.text
}
