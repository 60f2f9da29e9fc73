/**
 * The package README's example is `examples/proxy.ts`, and it runs: a gateway
 * in a program of one's own, in front of the SDK-built test server, answering
 * an allowed call and denying the one its policy names.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { tempDir } from "./harness.ts"
import { EXAMPLE_INPUT, findCache, FIXTURE_SERVER, fixtureEnv } from "./mcpCache.ts"

const EXAMPLE = fileURLToPath(new URL("../examples/proxy.ts", import.meta.url))
const README = fileURLToPath(new URL("../README.md", import.meta.url))
const cache = findCache()

describe("the README's example", () => {
  it("is examples/proxy.ts", () => {
    const readme = fs.readFileSync(README, "utf8")
    const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1]
    expect(block).toBe(fs.readFileSync(EXAMPLE, "utf8"))
  })

  it.skipIf(cache === null)("runs: one call allowed, the policy's tool denied", async () => {
    const dir = tempDir()
    const child = spawn(
      process.execPath,
      [EXAMPLE, path.join(dir, "journal"), "--", process.execPath, FIXTURE_SERVER],
      {
        env: { ...process.env, ...fixtureEnv(cache!) },
        stdio: ["pipe", "pipe", "pipe"]
      }
    )
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    // The client stays until its three answers came: once it goes, the server has only the
    // gateway's grace to answer, and on a busy machine it may still be starting.
    child.stdout.on("data", (b: Buffer) => {
      out.push(b)
      if (Buffer.concat(out).toString("utf8").split("\n").length > 3) child.stdin.end()
    })
    child.stderr.on("data", (b: Buffer) => err.push(b))
    child.stdin.write(EXAMPLE_INPUT)
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve))
    const stderr = Buffer.concat(err).toString("utf8")
    expect(code, stderr).toBe(0)
    const answers = Buffer.concat(out).toString("utf8").trim().split("\n").map((l) => JSON.parse(l) as { id: number })
    const byId = new Map(answers.map((a) => [a.id, JSON.stringify(a)]))
    expect(byId.get(1)).toContain("allowed")
    expect(byId.get(2)).toContain("session-journal denied mcp__everything__get-env [denyList")
    expect(stderr).toContain("2 calls, 1 denied")
  })
})
