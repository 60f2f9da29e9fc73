/**
 * Where the tests find PostgreSQL. `SESSION_JOURNAL_PG_URL` names the server (CI
 * sets it, and then an unreachable server fails the tests); without it the default
 * local server is tried, and when nothing answers the tests are skipped with one
 * line saying why.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"

/** The default server: trust auth, user postgres, database test. */
export const DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/test"

const fromEnv = process.env["SESSION_JOURNAL_PG_URL"]

/** The URL the tests use. */
export const url: string = fromEnv !== undefined && fromEnv !== "" ? fromEnv : DEFAULT_URL

const probe = (target: string): Promise<string | null> =>
  Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`SELECT 1 AS one`
      return null
    })).pipe(
      Effect.provide(
        PgClient.layer({ url: Redacted.make(target), connectTimeout: "3 seconds", applicationName: "sj-probe" })
      ),
      Effect.timeout("5 seconds"),
      Effect.catchCause((cause) => Effect.succeed(String(cause).split("\n")[0] ?? "unreachable"))
    )
  )

const failure = fromEnv !== undefined && fromEnv !== "" ? null : await probe(url)

/** Why the PostgreSQL tests are skipped, or `null` when they run. */
export const skipReason: string | null = failure === null
  ? null
  : `PostgreSQL tests skipped: SESSION_JOURNAL_PG_URL is not set and ${DEFAULT_URL} does not answer (${failure})`

if (skipReason !== null) console.warn(skipReason)

/** A table prefix unique to this run, so concurrent runs never share tables. */
export const freshPrefix = (label: string): string =>
  `sjt_${label}_${Date.now().toString(36)}_${process.pid.toString(36)}_`

/** A client for the test's own queries (setup, checks, teardown). */
export const adminLayer = (
  applicationName = "sj-test-admin"
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown> =>
  PgClient.layer({ url: Redacted.make(url), applicationName })
