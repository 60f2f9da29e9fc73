/**
 * Session metadata: title, labels, times and free JSON. Not chained; the value with
 * the later `updated_at` wins.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { MAX_PAYLOAD_DEPTH, MAX_PAYLOAD_SIZE } from "./Entry.ts"
import { check } from "./internal/jcs.ts"

const Millis = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))

// The free JSON is bounded like an entry payload (`setMeta` refuses more with
// `InvalidRecordField`), so stored metadata deeper than the bound is an issue when
// decoded rather than a stack overflow in whoever writes or reads it next. Strings
// are not held to RFC 8785 here: metadata is stored, never hashed.
const limits = { maxDepth: MAX_PAYLOAD_DEPTH, maxSize: MAX_PAYLOAD_SIZE, wellFormed: false } as const
const Data = Schema.Json.check(
  Schema.makeFilter((data: Schema.Json) => {
    const problem = check(data, limits)
    if (problem?._tag === "TooDeep") {
      return `nesting depth ${problem.depth} exceeds the limit of ${MAX_PAYLOAD_DEPTH}`
    }
    if (problem?._tag === "TooLarge") return `larger than the limit of ${MAX_PAYLOAD_SIZE}`
    return undefined
  })
)

/**
 * Metadata of a session. Times are milliseconds since the epoch.
 *
 * @since 0.1.0
 */
export const SessionMeta = Schema.Struct({
  title: Schema.optionalKey(Schema.String),
  labels: Schema.optionalKey(Schema.Array(Schema.String)),
  created_at: Schema.optionalKey(Millis),
  updated_at: Millis,
  data: Schema.optionalKey(Data)
})

/**
 * Metadata of a session.
 *
 * @since 0.1.0
 */
export type SessionMeta = typeof SessionMeta.Type

/**
 * A change to metadata: given fields replace the stored ones.
 *
 * @since 0.1.0
 */
export interface MetaPatch {
  readonly title?: string | undefined
  readonly labels?: ReadonlyArray<string> | undefined
  readonly data?: Schema.Json | undefined
}

/**
 * Applies a patch at time `nowMillis` to the current metadata (or none).
 *
 * @since 0.1.0
 */
export const patch = (current: SessionMeta | null, p: MetaPatch, nowMillis: number): SessionMeta => {
  const base: SessionMeta = current ?? { created_at: nowMillis, updated_at: nowMillis }
  // Never move updated_at backwards, so a patch always wins over what it patched.
  const updated_at = Math.max(nowMillis, base.updated_at)
  return {
    ...base,
    ...(p.title !== undefined ? { title: p.title } : {}),
    ...(p.labels !== undefined ? { labels: [...p.labels] } : {}),
    ...(p.data !== undefined ? { data: p.data } : {}),
    updated_at
  }
}
