/**
 * `--postgres URL` and `SESSION_JOURNAL_PG_URL`: the same commands on PostgreSQL,
 * through the real binary. Runs when a server answers (127.0.0.1:5432 by default,
 * or `SESSION_JOURNAL_PG_URL`); the tables get a prefix of their own and are
 * dropped afterwards.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import * as Effect from "effect/Effect"
import { afterAll } from "vitest"
import { run } from "./Run.ts"

const url = Pg.url
const admin = () => Pg.adminLayer("sj-cli-test-admin")
const reachable = Pg.skipReason === null

const prefix = Pg.freshPrefix("cli")
const env = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }

describe.skipIf(!reachable)("session-journal --postgres", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(admin()))))

  it("records, appends, lists and verifies in PostgreSQL", async () => {
    const base = ["--postgres", url]
    const rec = await run([
      ...base,
      "--json",
      "record",
      "pg1",
      "--tool",
      "read_file",
      "--server",
      "s",
      "--agent",
      "a",
      "--read",
      "5"
    ], { env })
    assert.strictEqual(rec.code, 0, rec.stderr)
    assert.strictEqual(JSON.parse(rec.stdout).sequence, 0)
    // The URL may also come from the environment.
    const app = await run(["--json", "append", "pg1", "--payload", "{\"role\":\"user\"}"], {
      env: { ...env, SESSION_JOURNAL_PG_URL: url }
    })
    assert.strictEqual(app.code, 0, app.stderr)
    assert.strictEqual(JSON.parse(app.stdout).sequence, 1)

    const list = await run([...base, "list", "--json"], { env })
    assert.strictEqual(list.code, 0, list.stderr)
    const sessions = JSON.parse(list.stdout).sessions
    assert.deepStrictEqual(sessions.map((s: { id: string; entries: number }) => [s.id, s.entries]), [["pg1", 2]])

    const verify = await run([...base, "verify", "--json"], { env })
    assert.strictEqual(verify.code, 0, verify.stderr)
    const report = JSON.parse(verify.stdout).sessions[0]
    assert.isTrue(report.ok)
    assert.strictEqual(report.entries_checked, 2)
    assert.strictEqual(report.head, sessions[0].head)
    assert.strictEqual(sessions[0].last_hash, sessions[0].head)

    const mirror = await run([...base, "mirror", "/tmp/never"], { env })
    assert.strictEqual(mirror.code, 3)
    assert.match(mirror.stderr, /mirror is not available/)
  })

  it("an unreachable server is a storage error (exit 3)", async () => {
    const r = await run(["--postgres", "postgres://postgres@127.0.0.1:1/test", "list"], { env })
    assert.strictEqual(r.code, 3, r.stderr)
    assert.match(r.stderr, /^session-journal: storage /)
  })
})
