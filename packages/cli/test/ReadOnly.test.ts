/**
 * The reading commands leave no trace: on a journal directory that does not exist
 * they create nothing (neither the directory nor `./.session-journal`) and say there
 * is no session; on an existing journal they change no byte and no mode; on a
 * database without our tables they create none.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, filesUnder, killAll, run, start, tempDir, waitForLine } from "./Run.ts"

afterAll(cleanup)

// Every path under `dir` with its mode and, for a file, the SHA-256 of its bytes.
const fingerprint = (dir: string): Array<string> =>
  filesUnder(dir).map((f) => {
    const p = path.join(dir, f)
    return `${f} ${fs.statSync(p).mode} ${crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex")}`
  })

// Each reading command, given the journal flags and a place for files it writes
// on request (a report's page).
const readers = (policy: string, out: string): ReadonlyArray<ReadonlyArray<string>> => [
  ["list"],
  ["--json", "list"],
  ["show", "s1"],
  ["stats", "s1"],
  ["verify"],
  ["verify", "s1"],
  ["tail", "s1"],
  ["export", "s1"],
  ["report", "s1", "--out", path.join(out, "s1.html")],
  ["policy", "test", policy, "s1"],
  ["prove", "s1", "0"],
  ["consistency", "s1", "0", "1"]
]

const policyFile = (dir: string): string => {
  const file = path.join(dir, "policy.json")
  fs.writeFileSync(file, `{"maxStreak":3}`)
  return file
}

describe("reading commands", () => {
  it("on a journal directory that does not exist: nothing is created, list says where it looked", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "journal")
    const out = path.join(dir, "out")
    fs.mkdirSync(out)
    for (const args of readers(policyFile(dir), out)) {
      const r = await run(["--dir", journal, ...args])
      assert.notStrictEqual(r.code, 70, `${args.join(" ")}: ${r.stderr}`)
      assert.isFalse(fs.existsSync(journal), `${args.join(" ")} created the journal directory`)
    }
    const listed = await run(["--dir", journal, "list"])
    assert.strictEqual(listed.code, 0, listed.stderr)
    assert.strictEqual(listed.stdout, `no sessions in the journal directory ${journal}\n`)
    const shown = await run(["--dir", journal, "show", "s1"])
    assert.strictEqual(shown.code, 2)
    assert.include(shown.stderr, "not found")
  })

  it("without --dir, in an empty working directory: no ./.session-journal appears", async () => {
    const cwd = tempDir()
    const r = await run(["list"], { cwd })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.stdout, "no sessions in the journal directory ./.session-journal\n")
    const s = await run(["stats", "s1"], { cwd })
    assert.strictEqual(s.code, 2, s.stderr)
    assert.deepStrictEqual(fs.readdirSync(cwd), [])
  })

  it("serve on a journal that does not exist creates nothing", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "journal")
    const child = start(["--dir", journal, "serve", "--port", "0"])
    try {
      await waitForLine(child, (l) => l.startsWith("serving "))
      assert.isFalse(fs.existsSync(journal))
    } finally {
      await killAll([child])
    }
    assert.isFalse(fs.existsSync(journal))
  })

  it("on an existing journal: no byte and no mode changes", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "journal")
    const out = path.join(dir, "out")
    fs.mkdirSync(out)
    for (const name of ["Read", "Bash", "Bash"]) {
      const r = await run(["--dir", journal, "record", "s1", "--tool", name, "--server", "srv", "--agent", "main"])
      assert.strictEqual(r.code, 0, r.stderr)
    }
    const before = fingerprint(journal)
    for (const args of readers(policyFile(dir), out)) {
      const r = await run(["--dir", journal, ...args])
      assert.notStrictEqual(r.code, 70, `${args.join(" ")}: ${r.stderr}`)
      assert.deepStrictEqual(fingerprint(journal), before, args.join(" "))
    }
  })
})

describe.skipIf(Pg.skipReason !== null)("reading commands on PostgreSQL", () => {
  const prefix = Pg.freshPrefix("ro")
  const admin = () => Pg.adminLayer("sj-cli-readonly-admin")
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(admin()))))

  it("on a database without the tables: none is created, list says so", async () => {
    const dir = tempDir()
    const env = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }
    for (const args of readers(policyFile(dir), dir).filter((a) => a[0] !== "prove" && a[0] !== "consistency")) {
      const r = await run(["--postgres", Pg.url, ...args], { env })
      assert.notStrictEqual(r.code, 70, `${args.join(" ")}: ${r.stderr}`)
    }
    const listed = await run(["--postgres", Pg.url, "list"], { env })
    assert.strictEqual(listed.code, 0, listed.stderr)
    assert.strictEqual(listed.stdout, `no sessions in PostgreSQL (tables ${prefix}…)\n`)
    const tables = await Effect.runPromise(
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ readonly tablename: string }>`
          SELECT tablename FROM pg_tables WHERE starts_with(tablename, ${prefix})`
      }).pipe(Effect.provide(admin()))
    )
    assert.deepStrictEqual(tables.map((t) => t.tablename), [])
  })
})
