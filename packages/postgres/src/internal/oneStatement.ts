/**
 * The text of the one-statement compare-and-append (DESIGN §8, "One round trip when
 * the tip matches"). There are eight, by three choices: whether the batch starts a
 * session (the row may have to be created), whether the tip has a hash to compare,
 * and whether metadata comes along. Each is built once per prefix, on first use, so
 * an append builds nothing but its parameters, and the driver finds the statement
 * it prepared by the same text every time.
 *
 * The parameters, in order (`params`): `$1` the session, `$2` the stored count the
 * batch follows (`after.sequence`), `$3` the count after it, `$4` its newest entry's
 * hash, `$5` the exported head after it, `$6` the entries' hashes and `$7` their
 * texts in sequence order (the first one's sequence is `$2`: the statement numbers
 * them itself, so only a batch numbered on from `after` may use it); then, when
 * present, the tip's hash; the metadata's text and time; and for a new session the
 * caps of its row.
 */
import type { Names } from "./schema.ts"

// A name as an identifier of the statement: the prefix rule allows only
// lowercase letters, digits and `_`, and the quotes are doubled all the same.
const identifier = (name: string): string => `"${name.replaceAll(`"`, `""`)}"`

/** The statement texts of one prefix, each built when first asked for. */
export const make = (names: Names) => {
  const sessions = identifier(names.sessions)
  const entries = identifier(names.entries)
  const built: Array<string | undefined> = []

  const build = (creates: boolean, hashed: boolean, withMeta: boolean): string => {
    let n = 7
    const sameHead = hashed ? ` AND s.head = $${++n}::text` : ""
    const metaText = withMeta ? `$${++n}::text` : "NULL::text"
    const metaAt = withMeta ? `$${++n}::int8` : "NULL::int8"
    // Newer metadata replaces older, as in the locking transaction.
    const newer = `s.meta_updated_at IS NULL OR s.meta_updated_at <= ${metaAt}`
    const setMeta = withMeta
      ? `, meta = CASE WHEN ${newer} THEN ${metaText} ELSE s.meta END,` +
        ` meta_updated_at = CASE WHEN ${newer} THEN ${metaAt} ELSE s.meta_updated_at END`
      : ""
    const advance = `next_sequence = $3::int8, head = $4::text, exported_head = $5::text,` +
      ` entry_bytes = s.entry_bytes + (SELECT n FROM total), updated_at = now()${setMeta}`
    // No `pg_notify` here: a notifying transaction holds a server-wide lock until
    // its commit is on disk (DESIGN §8); other instances are told after the commit.
    const returning = `RETURNING s.session_id`
    // On the empty tip the row may not exist yet: it is proposed with the batch, and
    // an existing row is advanced only if it is still empty. Past it, the row is
    // there, and `UPDATE` waits for a writer holding it and compares its newest
    // version.
    const advanceRow = creates
      ? `INSERT INTO ${sessions} AS s (session_id, next_sequence, head, exported_head, entry_cap,` +
        ` tool_counts_cap, entry_bytes, meta, meta_updated_at)` +
        ` VALUES ($1::text, $3::int8, $4::text, $5::text, $${++n}::int4, $${++n}::int4, (SELECT n FROM total),` +
        ` ${metaText}, ${metaAt})` +
        ` ON CONFLICT (session_id) DO UPDATE SET ${advance} WHERE s.next_sequence = 0${sameHead} ${returning}`
      : `UPDATE ${sessions} AS s SET ${advance}` +
        ` WHERE s.session_id = $1::text AND s.next_sequence = $2::int8${sameHead} ${returning}`
    // The batch's bytes as PostgreSQL stores them (`octet_length`, in the
    // database's encoding), as the locking transaction and loads count them.
    return `WITH batch AS (SELECT $2::int8 + t.i - 1 AS s, t.h, t.e` +
      ` FROM unnest($6::text[], $7::text[]) WITH ORDINALITY AS t(h, e, i)),` +
      ` total AS (SELECT coalesce(sum(octet_length(e)), 0)::int8 AS n FROM batch),` +
      ` advanced AS (${advanceRow}),` +
      ` inserted AS (INSERT INTO ${entries} (session_id, sequence, entry_hash, entry)` +
      ` SELECT a.session_id, b.s, b.h, b.e FROM advanced a, batch b)` +
      ` SELECT (SELECT n FROM total) AS bytes FROM advanced`
  }

  /**
   * The statement for a batch that starts a session (`creates`), whose tip has a
   * hash (`hashed`), with metadata (`withMeta`).
   */
  const text = (creates: boolean, hashed: boolean, withMeta: boolean): string => {
    const key = (creates ? 4 : 0) + (hashed ? 2 : 0) + (withMeta ? 1 : 0)
    return built[key] ??= build(creates, hashed, withMeta)
  }

  return { text }
}
