/**
 * `checkpoint --sign`, `verify --checkpoint`, `prove` and `consistency` on PostgreSQL
 * through the real binary: the same tree as on the filesystem (the leaves are the
 * entries' hashes, wherever they are stored), consistent as the session grows, and a
 * clean cut made in SQL (rows, count, head and checkpoint all made to agree) or a
 * replaced session caught against the checkpoint. Runs when a server answers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Merkle, TreeHead } from "@session-journal/core"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, run, tempDir } from "./Run.ts"

const reachable = Pg.skipReason === null
const prefix = Pg.freshPrefix("tree")
const env = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }
const base = ["--postgres", Pg.url]

const sql = <A, E>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    SqlClient.SqlClient.use(f).pipe(Effect.provide(Pg.adminLayer("sj-cli-tree"))) as Effect.Effect<A, unknown>
  )

const importEntries = async (id: string, n: number, tool: string) => {
  const input = Array.from(
    { length: n },
    (_, i) => JSON.stringify({ tool_name: `${tool}-${i}`, server_id: "s", agent_id: "a" }) + "\n"
  ).join("")
  const r = await run([...base, "import", id, "-"], { env, input })
  assert.strictEqual(r.code, 0, r.stderr)
}

describe.skipIf(!reachable)("checkpoint --sign / verify --checkpoint on PostgreSQL", () => {
  afterAll(async () => {
    cleanup()
    await Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(Pg.adminLayer("sj-cli-tree-admin"))))
  })

  it("signs, stays consistent as the session grows, proves, and catches a clean cut and a replacement", async () => {
    const dir = tempDir()
    const keyFile = path.join(dir, "key")
    const key = await run(["key", "generate", "pg.example/j", "--out", keyFile])
    assert.strictEqual(key.code, 0, key.stderr)
    const vkey = key.stdout.trim()
    await importEntries("p", 6, "t")
    const signed = await run([...base, "checkpoint", "p", "--sign", keyFile], { env })
    assert.strictEqual(signed.code, 0, signed.stderr)
    const cp = path.join(dir, "cp")
    fs.writeFileSync(cp, signed.stdout)
    const root6 = TreeHead.fromBase64(signed.stdout.split("\n")[2]!)!

    await importEntries("p", 3, "u")
    const ok = await run([...base, "--json", "verify", "p", "--checkpoint", cp, "--key", vkey], { env })
    assert.strictEqual(ok.code, 0, ok.stderr)
    assert.deepInclude(JSON.parse(ok.stdout).checkpoint, { ok: true, tree_size: 6, current_size: 9 })

    const prove = await run([...base, "--json", "prove", "p", "4", "--size", "6"], { env })
    assert.strictEqual(prove.code, 0, prove.stderr)
    const p = JSON.parse(prove.stdout)
    const nodes = (ns: ReadonlyArray<string>) => ns.map((n) => TreeHead.fromBase64(n)!)
    const leaf = Merkle.leafHash(Merkle.entryLeaf(p.entry_hash))
    assert.isTrue(Result.isSuccess(Merkle.verifyInclusion(4, 6, leaf, nodes(p.proof), root6)))
    const cons = await run([...base, "--json", "consistency", "p", "6", "9"], { env })
    assert.strictEqual(cons.code, 0, cons.stderr)
    assert.strictEqual(JSON.parse(cons.stdout).new_size, 9)

    // A clean cut back to 4 entries: rows, count, head and checkpoint all agree.
    const t = { sessions: `${prefix}sessions`, entries: `${prefix}entries`, checkpoints: `${prefix}checkpoints` }
    await sql((q) =>
      Effect.gen(function*() {
        const rows = yield* q<{ entry_hash: string }>`SELECT entry_hash FROM ${
          q(t.entries)
        } WHERE session_id = 'p' AND sequence = 3`
        yield* q`DELETE FROM ${q(t.entries)} WHERE session_id = 'p' AND sequence >= 4`
        yield* q`DELETE FROM ${q(t.checkpoints)} WHERE session_id = 'p'`
        yield* q`UPDATE ${q(t.sessions)} SET next_sequence = 4, head = ${
          rows[0]!.entry_hash
        }, exported_head = NULL WHERE session_id = 'p'`
      })
    )
    const plain = await run([...base, "verify", "p"], { env })
    assert.strictEqual(plain.code, 0, `the cut alone verifies: ${plain.stdout}${plain.stderr}`)
    const cut = await run([...base, "--json", "verify", "p", "--checkpoint", cp, "--key", vkey], { env })
    assert.strictEqual(cut.code, 1, cut.stderr)
    assert.strictEqual(JSON.parse(cut.stdout).checkpoint.problem.reason, "cut")

    // Replaced: every row of the session gone, six other entries written.
    await sql((q) =>
      Effect.gen(function*() {
        for (const table of [t.entries, t.checkpoints, t.sessions]) {
          yield* q`DELETE FROM ${q(table)} WHERE session_id = 'p'`
        }
      })
    )
    await importEntries("p", 6, "v")
    const replaced = await run([...base, "--json", "verify", "p", "--checkpoint", cp, "--key", vkey], { env })
    assert.strictEqual(replaced.code, 1, replaced.stderr)
    assert.strictEqual(JSON.parse(replaced.stdout).checkpoint.problem.reason, "replaced")
  })
  it("publish reads the session from PostgreSQL; the tiles verify from the directory alone, and the same entries give the same root as on the filesystem", async () => {
    const dir = tempDir()
    const keyFile = path.join(dir, "key")
    const key = await run(["key", "generate", "pg.example/pub", "--out", keyFile])
    assert.strictEqual(key.code, 0, key.stderr)
    await importEntries("pub", 300, "t")
    const out = path.join(dir, "out")
    const first = await run([...base, "--json", "publish", "pub", "--out", out, "--sign", keyFile], { env })
    assert.strictEqual(first.code, 0, first.stderr)
    const cp = path.join(dir, "cp")
    fs.copyFileSync(path.join(out, "checkpoint"), cp)
    await importEntries("pub", 20, "u")
    const second = await run([...base, "--json", "publish", "pub", "--out", out, "--sign", keyFile], { env })
    assert.deepInclude(JSON.parse(second.stdout), { old_size: 300, tree_size: 320 })
    const v = await run(["--json", "verify-remote", out, "--key", key.stdout.trim(), "--since", cp])
    assert.strictEqual(v.code, 0, v.stderr)
    assert.deepInclude(JSON.parse(v.stdout), { ok: true, tree_size: 320, since: 300 })
    const signed = await run([...base, "checkpoint", "pub", "--sign", keyFile], { env })
    assert.strictEqual(
      signed.stdout.split("\n")[2],
      fs.readFileSync(path.join(out, "checkpoint"), "utf8").split("\n")[2]
    )
  })
})
