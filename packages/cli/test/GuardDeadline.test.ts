/**
 * The resident guard answers within its deadline whatever its storage does: a
 * session whose lock another process holds while the guard waits for it (`--wait`),
 * and a PostgreSQL session row locked by another connection (`SELECT … FOR
 * UPDATE` held in a transaction), keep `Hook.handle` waiting; the guard refuses
 * the event in its refusal form once `--handle-timeout-ms` passes, saying what
 * timed out, through the real forwarder, long before the forwarder's own
 * deadline. Once the lock goes, the guard records again, and SIGTERM still exits 0.
 */
import { assert, describe, it } from "@effect/vitest"
import { Hook } from "@session-journal/claude-code"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, exited, hasNodeAdapter, killAll, ownBoot, ownPidns, run, start, tempDir, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()
const TOKEN = "guard-deadline-test-token-0123456789"
const SID = "7e1c3f0e-8a2b-4c5d-9e6f-7a8b9c0d1e2f"
const started: Array<ChildProcess> = []
const prefix = Pg.freshPrefix("guarddl")
const pgReachable = Pg.skipReason === null

afterAll(async () => {
  await killAll(started)
  cleanup()
  if (pgReachable) {
    await Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(Pg.adminLayer("sj-guard-dl-admin"))))
  }
})

const preToolUse = (n: number) =>
  JSON.stringify({
    session_id: SID,
    transcript_path: `/tmp/x/.claude/projects/-tmp-x/${SID}.jsonl`,
    cwd: "/tmp/x",
    hook_event_name: "PreToolUse",
    tool_name: "Read",
    tool_input: { file_path: `/tmp/x/n-${n}.txt` },
    tool_use_id: `toolu_deadline${n.toString().padStart(4, "0")}`
  })

const stopEvent = (active: boolean) =>
  JSON.stringify({
    session_id: SID,
    transcript_path: `/tmp/x/.claude/projects/-tmp-x/${SID}.jsonl`,
    cwd: "/tmp/x",
    hook_event_name: "Stop",
    stop_hook_active: active
  })

const journalSession = Hook.sessionId({ session_id: SID, cwd: "/tmp/x", hook_event_name: "PreToolUse" })

/** Another connection holds the session's row with SELECT … FOR UPDATE until `release`. */
const lockRow = (name: string) => {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let locked!: (rows: number) => void
  const isLocked = new Promise<number>((resolve) => (locked = resolve))
  const holding = Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql`SELECT session_id FROM ${
          sql(`${prefix}sessions`)
        } WHERE session_id = ${journalSession} FOR UPDATE`
        locked(rows.length)
        yield* Effect.promise(() => released)
      }))
    }).pipe(Effect.provide(Pg.adminLayer(name)))
  )
  return { holding, isLocked, release }
}

const startGuard = async (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}) => {
  const child = start(["claude-code", "guard", "--port", "0", ...args], {
    env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN, ...env }
  })
  started.push(child)
  let stderr = ""
  child.stderr!.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
  const line = await waitForLine(child, (l) => l.includes("listening at "))
  return { child, url: line.slice(line.indexOf("http://"), line.indexOf(",")), stderr: () => stderr }
}

const forward = (url: string, input: string) =>
  run(["claude-code", "forward", "--url", url, "--timeout-ms", "30000"], {
    input,
    env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN }
  })

const stopped = async (g: { readonly child: ChildProcess; readonly stderr: () => string }) => {
  g.child.kill("SIGTERM")
  assert.strictEqual(await exited(g.child), 0, g.stderr())
}

// What a held lock does to the forwarded events: a PreToolUse denied by the guard
// (not by the forwarder's own deadline) saying what timed out; a Stop blocked once
// and let through when stop_hook_active says a refusal already kept it going.
const assertRefusedOnDeadline = async (url: string, ms: number) => {
  const pre = await forward(url, preToolUse(2))
  assert.strictEqual(pre.code, 0, pre.stderr)
  const out = JSON.parse(pre.stdout) as {
    hookSpecificOutput: { permissionDecision: string; permissionDecisionReason: string }
  }
  assert.strictEqual(out.hookSpecificOutput.permissionDecision, "deny")
  assert.include(out.hookSpecificOutput.permissionDecisionReason, `could not record PreToolUse within ${ms} ms`)
  assert.notInclude(out.hookSpecificOutput.permissionDecisionReason, "did not answer within")
  const stop = await forward(url, stopEvent(false))
  assert.strictEqual(stop.code, 0, stop.stderr)
  assert.strictEqual((JSON.parse(stop.stdout) as { decision: string }).decision, "block")
  assert.include(stop.stdout, `could not record Stop within ${ms} ms`)
  const again = await forward(url, stopEvent(true))
  assert.strictEqual(again.code, 0, again.stderr)
  assert.deepStrictEqual(JSON.parse(again.stdout), {})
}

describe.skipIf(!nodeAdapter)("the guard's deadline on the filesystem", () => {
  it(
    "a session lock held by another process while the guard waits for it: refused when --handle-timeout-ms passes",
    async () => {
      const dir = path.join(tempDir(), "journal")
      // The session exists (a first guard recorded into it and closed it).
      const first = await startGuard(["--root", dir])
      const ok = await forward(first.url, preToolUse(1))
      assert.deepStrictEqual(JSON.parse(ok.stdout), {}, ok.stderr)
      await stopped(first)

      const holder = spawn("sleep", ["600"], { stdio: "ignore" })
      started.push(holder)
      try {
        fs.writeFileSync(
          path.join(dir, journalSession, "lock"),
          `${
            JSON.stringify({
              pid: holder.pid,
              host: os.hostname(),
              start: null,
              token: "held-by-another-writer",
              acquired_at: Date.now(),
              boot: ownBoot,
              pidns: ownPidns
            })
          }\n`,
          { mode: 0o600 }
        )
        const g = await startGuard(["--root", dir, "--wait", "10m", "--handle-timeout-ms", "1500"])
        await assertRefusedOnDeadline(g.url, 1500)
        await stopped(g)
      } finally {
        holder.kill("SIGKILL")
      }
    },
    120_000
  )
})

describe.skipIf(!pgReachable)("the guard's deadline on PostgreSQL", () => {
  it(
    "a session row locked by another connection (SELECT … FOR UPDATE): refused when --handle-timeout-ms passes",
    async () => {
      const env = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }
      const g = await startGuard(["--postgres", Pg.url, "--handle-timeout-ms", "1500"], env)
      const first = await forward(g.url, preToolUse(1))
      assert.deepStrictEqual(JSON.parse(first.stdout), {}, first.stderr)

      const { holding, isLocked, release } = lockRow("sj-guard-dl-lock")
      try {
        assert.strictEqual(await isLocked, 1, "the session's row was not found")
        await assertRefusedOnDeadline(g.url, 1500)
      } finally {
        release()
        await holding
      }
      // The lock gone, the guard records again.
      const after = await forward(g.url, preToolUse(3))
      assert.deepStrictEqual(JSON.parse(after.stdout), {}, after.stderr)
      await stopped(g)
    },
    120_000
  )
})

describe.skipIf(!pgReachable)("the command hook's deadline on PostgreSQL", () => {
  it(
    "a session row locked by another connection: the hook denies within --deadline, saying what it was doing",
    async () => {
      const env = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }
      const hook = (n: number) =>
        run(["--postgres", Pg.url, "claude-code", "hook", "--deadline", "4s"], {
          input: preToolUse(n),
          env,
          process: true
        })
      const first = await hook(10)
      assert.deepStrictEqual(JSON.parse(first.stdout), {}, first.stderr)
      const { holding, isLocked, release } = lockRow("sj-hook-dl-lock")
      try {
        assert.strictEqual(await isLocked, 1, "the session's row was not found")
        const late = await hook(11)
        const reason = JSON.parse(late.stdout).hookSpecificOutput?.permissionDecisionReason as string
        assert.match(reason, /no decision within the hook's deadline of 4000 ms \(still/, late.stdout + late.stderr)
      } finally {
        release()
        await holding
      }
      const after = await hook(12)
      assert.deepStrictEqual(JSON.parse(after.stdout), {}, after.stderr)
    },
    120_000
  )
})
