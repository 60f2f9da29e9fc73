/**
 * The command's input as an operator and an adversary give it: signals sent to
 * the pid a caller spawned through the workspace shim, a live pipe that stays
 * open, a bad line deep in an import, bytes that are not UTF-8, a line far past
 * the bound, bad PostgreSQL settings. Real child processes and temp dirs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, InvalidRecordField } from "@session-journal/core"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as Import from "../src/commands/Import.ts"
import { ExitCode, exitCodeOf, ImportStopped, InvalidInput, OutputFailed } from "../src/Failure.ts"
import * as Input from "../src/Input.ts"
import { BIN, cleanup, exited, run, SHIM, start, tempDir, waitForLine } from "./Run.ts"

afterAll(cleanup)

const lines = (s: string): Array<string> => s.split("\n").filter((l) => l.length > 0)
const tool = (i: number) => JSON.stringify({ tool_name: "t", server_id: "s", agent_id: `a${i}` })

const env = (): NodeJS.ProcessEnv => {
  const e = { ...process.env }
  delete e["SESSION_JOURNAL_DIR"]
  delete e["SESSION_JOURNAL_PG_URL"]
  delete e["SESSION_JOURNAL_PG_TABLE_PREFIX"]
  return e
}

/** Starts the command through the workspace shim, as an operator's shell does. */
const startShim = (args: ReadonlyArray<string>): ChildProcess =>
  spawn(SHIM, [...args], { cwd: os.tmpdir(), env: env(), stdio: ["pipe", "pipe", "pipe"] })

const until = async (check: () => Promise<boolean> | boolean, what: string, deadlineMs = 30_000) => {
  const end = Date.now() + deadlineMs
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const shown = async (dir: string, id: string): Promise<number> => {
  const r = await run(["--dir", dir, "--json", "show", id])
  return r.code === 0 ? lines(r.stdout).length : -1
}

describe("signals", () => {
  it("SIGTERM to the pid spawned through the shim reaches node: exit 130 and the lock is released", async () => {
    const dir = tempDir()
    const holder = startShim(["--dir", dir, "--json", "import", "term", "-"])
    try {
      holder.stdin!.write(tool(0) + "\n")
      await waitForLine(holder, (l) => l.includes("\"sequence\":0"))
      // The pid the caller holds is node's own, not a wrapper's.
      assert.match(fs.readlinkSync(`/proc/${holder.pid}/exe`), /node$/)
      const code = exited(holder)
      holder.kill("SIGTERM")
      assert.strictEqual(await code, ExitCode.interrupted)
      const second = await run([
        "--dir",
        dir,
        "--json",
        "record",
        "term",
        "--tool",
        "t",
        "--server",
        "s",
        "--agent",
        "a"
      ])
      assert.strictEqual(second.code, 0, second.stderr)
      assert.strictEqual(JSON.parse(second.stdout)["sequence"], 1)
    } finally {
      holder.kill("SIGKILL")
    }
  })
})

describe("import streams", () => {
  it("lines from a pipe that stays open are durable as they arrive", async () => {
    const dir = tempDir()
    const child = start(["--dir", dir, "--json", "import", "live", "-"])
    try {
      const out: Array<string> = []
      child.stdout!.on("data", (b: Buffer) => out.push(...lines(b.toString("utf8"))))
      child.stdin!.write([tool(0), tool(1), tool(2)].join("\n") + "\n")
      await until(() => out.length === 3, "three durable entries")
      // Another process reads them from storage while stdin is still open.
      await until(async () => (await shown(dir, "live")) === 3, "three stored entries")
      child.stdin!.write(tool(3) + "\n")
      await until(async () => (await shown(dir, "live")) === 4, "the fourth entry")
      assert.strictEqual(child.exitCode, null, "still running")
      child.stdin!.end(tool(4))
      assert.strictEqual(await exited(child), 0)
      assert.deepStrictEqual(out.map((l) => JSON.parse(l)["sequence"]), [0, 1, 2, 3, 4])
    } finally {
      child.kill("SIGKILL")
    }
  })

  it("a bad line 1,501 stops the import after committing the 1,500 before it, and says so", async () => {
    const dir = tempDir()
    const input = [...Array.from({ length: 1500 }, (_, i) => tool(i)), "{\"tool_name\":\"t\"}", tool(1501)].join("\n") +
      "\n"
    const text = await run(["--dir", dir, "import", "deep", "-"], { input })
    assert.strictEqual(text.code, 2, text.stderr)
    assert.match(
      text.stderr,
      /^session-journal: invalid server_id on line 1501: .*the 1500 entries before it are committed \(last sequence 1499\)\.\n$/
    )
    assert.strictEqual(await shown(dir, "deep"), 1500)

    const json = await run(["--dir", dir, "--json", "import", "deep2", "-"], { input })
    assert.strictEqual(json.code, 2, json.stderr)
    const out = lines(json.stdout)
    assert.strictEqual(out.length, 1501)
    assert.deepStrictEqual(JSON.parse(out[1500]!), {
      imported: 1500,
      last_sequence: 1499,
      stopped: { line: 1501, field: "server_id", reason: JSON.parse(out[1500]!).stopped.reason }
    })
    assert.strictEqual(JSON.parse(out[1499]!)["sequence"], 1499)
  })
})

describe("input bytes", () => {
  it("bytes that are not UTF-8 exit 2 naming the line and byte, and nothing is stored as U+FFFD", async () => {
    const dir = tempDir()
    const bad = Buffer.concat([
      Buffer.from(tool(0) + "\n{\"kind\":\"message\",\"payload\":\"caf"),
      Buffer.from([0xe9]),
      Buffer.from("\"}\n")
    ])
    const file = path.join(tempDir(), "latin1.jsonl")
    fs.writeFileSync(file, bad)
    for (const args of [["import", "u8", file], ["import", "u8", "-"]]) {
      const r = start(["--dir", dir, ...args])
      const err: Array<Buffer> = []
      r.stderr!.on("data", (b: Buffer) => err.push(b))
      r.stdin!.end(bad)
      assert.strictEqual(await exited(r), 2)
      assert.match(
        Buffer.concat(err).toString("utf8"),
        /invalid input on line 2: not valid UTF-8 at byte 33 of the line, offset 82 of the input \(0xe9\)/
      )
    }
    const show = await run(["--dir", dir, "--json", "show", "u8"])
    assert.notInclude(show.stdout, "\uFFFD")
    assert.strictEqual(lines(show.stdout).length, 2, "the good first line of each run")

    const payloadFile = path.join(tempDir(), "payload.json")
    fs.writeFileSync(payloadFile, Buffer.from([0x22, 0x61, 0xff, 0x22]))
    const fromFile = await run(["--dir", dir, "append", "u8", "--payload", `@${payloadFile}`])
    assert.strictEqual(fromFile.code, 2, fromFile.stderr)
    assert.match(fromFile.stderr, /invalid --payload: not valid UTF-8 at byte 3 \(0xff\)/)
    const ok = await run(["--dir", dir, "--json", "append", "u8", "--payload", "-"], { input: "{\"text\":\"café\"}" })
    assert.strictEqual(ok.code, 0, ok.stderr)
    assert.deepStrictEqual(JSON.parse(ok.stdout)["payload"], { text: "café" })
  })

  it("a 50 MiB line exits 2 naming the line and the bound, with memory bounded", async () => {
    const dir = tempDir()
    const small = path.join(tempDir(), "small.jsonl")
    fs.writeFileSync(small, tool(0) + "\n")
    const big = path.join(tempDir(), "big.jsonl")
    const fd = fs.openSync(big, "w")
    fs.writeSync(fd, tool(0) + "\n{\"kind\":\"message\",\"payload\":\"")
    const mib = Buffer.alloc(1024 * 1024, "x")
    for (let i = 0; i < 50; i++) fs.writeSync(fd, mib)
    fs.writeSync(fd, "\"}\n")
    fs.closeSync(fd)

    // Peak RSS of the child, sampled from /proc until it ends (VmHWM only grows).
    const peak = async (file: string) => {
      const child = spawn(process.execPath, [BIN, "--dir", dir, "import", `p${path.basename(file, ".jsonl")}`, file], {
        env: env(),
        stdio: ["ignore", "pipe", "pipe"]
      })
      const err: Array<Buffer> = []
      child.stderr!.on("data", (b: Buffer) => err.push(b))
      let kib = 0
      const sample = () => {
        try {
          const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${child.pid}/status`, "utf8"))
          if (m !== null) kib = Math.max(kib, Number(m[1]))
        } catch {
          // gone
        }
      }
      const timer = setInterval(sample, 5)
      const code = await exited(child)
      clearInterval(timer)
      return { code, mib: kib / 1024, stderr: Buffer.concat(err).toString("utf8") }
    }
    const base = await peak(small)
    assert.strictEqual(base.code, 0, base.stderr)
    const r = await peak(big)
    assert.strictEqual(r.code, 2, r.stderr)
    assert.match(
      r.stderr,
      /invalid input on line 2: the line is longer than the bound of 8 MiB \(8388608 bytes\); import stopped there, the 1 entry before it is committed \(last sequence 0\)\./
    )
    // The line is never held whole: at most the bound and a little more.
    assert.isBelow(r.mib, 256, `peak RSS ${r.mib} MiB`)
    assert.isBelow(r.mib - base.mib, 64, `peak RSS ${r.mib} MiB vs ${base.mib} MiB for a one-line import`)
  })
})

describe("PostgreSQL settings", () => {
  it("a bad URL or table prefix is bad input (exit 2) naming the flag or variable", async () => {
    const cases: Array<[Array<string>, NodeJS.ProcessEnv, RegExp]> = [
      [["--postgres", "not a url", "list"], {}, /^session-journal: invalid --postgres: /],
      [["--postgres", "http://127.0.0.1:5432/test", "list"], {}, /^session-journal: invalid --postgres: /],
      [["list"], { SESSION_JOURNAL_PG_URL: "localhost:5432" }, /^session-journal: invalid SESSION_JOURNAL_PG_URL: /],
      [
        ["--postgres", "postgres://postgres@127.0.0.1:5432/test", "list"],
        { SESSION_JOURNAL_PG_TABLE_PREFIX: "Bad-Prefix" },
        /^session-journal: invalid SESSION_JOURNAL_PG_TABLE_PREFIX: "Bad-Prefix" is not a table prefix/
      ]
    ]
    for (const [args, extra, pattern] of cases) {
      const r = await run(args, { env: extra })
      assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stderr}`)
      assert.match(r.stderr, pattern)
    }
  })
})

describe("decoding", () => {
  it("invalidUtf8At finds a bad byte exactly when a fatal TextDecoder refuses the bytes", () => {
    const decoder = new TextDecoder("utf-8", { fatal: true })
    const byte = fc.oneof(
      fc.integer({ min: 0, max: 255 }),
      fc.constantFrom(0x80, 0xbf, 0xc0, 0xc2, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5)
    )
    fc.assert(
      fc.property(
        fc.oneof(fc.array(byte, { maxLength: 12 }), fc.string({ unit: "binary" }).map((s) => [...Buffer.from(s)])),
        (arr) => {
          const bytes = Uint8Array.from(arr)
          let valid = true
          try {
            decoder.decode(bytes)
          } catch {
            valid = false
          }
          const at = Input.invalidUtf8At(bytes)
          assert.strictEqual(at === -1, valid)
          // Everything before the bad byte is well-formed.
          if (at > 0) decoder.decode(bytes.subarray(0, at))
        }
      ),
      { numRuns: 5000 }
    )
  })

  it("importItem's schemas accept a line exactly when core's write-time validation does", () => {
    const identity = fc.oneof(
      fc.constantFrom("read_file", " x", "x ", "", "a\u0000b", "\uFEFFx", "x\u0085", "ok"),
      fc.string()
    )
    const count = fc.oneof(
      fc.constantFrom(0, 1, -1, 1.5, Entry.MAX_U53, Entry.MAX_U53 + 1, Entry.MAX_U32 + 1),
      fc.integer()
    )
    const maybe = <A>(a: fc.Arbitrary<A>) =>
      fc.option(fc.oneof(a, fc.constant("1" as unknown as A)), { nil: undefined })
    const toolLine = fc.record({
      tool_name: fc.oneof(identity, fc.constant(5 as unknown as string)),
      server_id: identity,
      agent_id: identity,
      bytes_read: maybe(count),
      bytes_written: maybe(count),
      delegation_depth: maybe(count),
      allowed: maybe(fc.boolean())
    }, { requiredKeys: [] })
    fc.assert(
      fc.property(toolLine, (line) => {
        const got = Import.importItem(JSON.stringify(line), 7)
        const want = Entry.validateToolParams({
          tool_name: line.tool_name as string,
          server_id: line.server_id as string,
          agent_id: line.agent_id as string,
          bytes_read: (line.bytes_read ?? 0) as number,
          bytes_written: (line.bytes_written ?? 0) as number,
          delegation_depth: (line.delegation_depth ?? 0) as number,
          allowed: line.allowed ?? true
        })
        assert.strictEqual(Result.isSuccess(got), Result.isSuccess(want), JSON.stringify(line))
        if (Result.isSuccess(got) && Result.isSuccess(want)) {
          assert.deepStrictEqual(got.success, { _tag: "Tool", params: want.success })
        }
        if (Result.isFailure(got) && Result.isFailure(want)) {
          assert.instanceOf(want.failure, InvalidRecordField)
          assert.strictEqual(got.failure.field, want.failure.field, JSON.stringify(line))
          assert.strictEqual(got.failure.line, 7)
        }
      }),
      { numRuns: 3000 }
    )
    const kind = fc.oneof(fc.constantFrom("message", "tool_result", "", "a b", "x".repeat(65), "note:1"), fc.string())
    fc.assert(
      fc.property(kind, fc.jsonValue(), (k, payload) => {
        if (k === "tool") return
        const got = Import.importItem(JSON.stringify({ kind: k, payload }), 1)
        const want = Entry.validatePayload(k, JSON.parse(JSON.stringify(payload ?? null)))
        assert.strictEqual(Result.isSuccess(got), Result.isSuccess(want), JSON.stringify([k, payload]))
      }),
      { numRuns: 2000 }
    )
  })

  it("every failure maps to its exit code (the mapping is exhaustive over the union)", () => {
    const input = new InvalidInput({ field: "x", reason: "y", line: 1 })
    assert.strictEqual(exitCodeOf(input), ExitCode.usage)
    assert.strictEqual(exitCodeOf(new ImportStopped({ input, imported: 0, lastSequence: null })), ExitCode.usage)
    assert.strictEqual(exitCodeOf(new OutputFailed({ code: "ENOSPC", reason: "no space" })), ExitCode.output)
  })
})
