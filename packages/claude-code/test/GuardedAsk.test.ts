/**
 * An ask reaches a person, against the real Claude Code CLI offline: the driver
 * answers a PreToolUse the policy asks about with `permissionDecision: "ask"`,
 * the CLI then sends `can_use_tool` (`--permission-prompt-tool stdio`), and the
 * session's `approve` answers it: an approved call runs, a refused one never does
 * and the model reads the person's message. Without `approve` no one can be
 * asked, and the call is denied saying approval was needed. The chain records
 * each asked call `allowed: true` with a decision `verdict: "ask"`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Policy } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as Hook from "../src/Hook.ts"
import type { Session } from "../src/index.ts"
import * as Cli from "./claudeCli.ts"
import * as Fake from "./fakeApi.ts"
import * as Harness from "./harness.ts"

afterAll(() => Cli.cleanup())

const bin = Cli.CLAUDE_BIN

const compiled = Policy.compile(Result.getOrThrow(Policy.decodeText(JSON.stringify({ ask: "Bash(echo asked*)" }))))

type Payload = { readonly [key: string]: unknown }
const payloadOf = (e: Entry.Entry): Payload =>
  "payload" in e && typeof e.payload === "object" && e.payload !== null ? e.payload as Payload : {}

describe.skipIf(bin === null)("an ask, against the real CLI", () => {
  it.live("reaches the host's approve through can_use_tool: approved runs, refused never does", () => {
    let work = ""
    const asked: Array<Session.Approval> = []
    return Harness.withSession(
      (r) =>
        [
          Fake.tools(Fake.bash(`echo asked-one > ${path.join(work, "one.txt")}`)),
          Fake.tools(Fake.bash(`echo asked-two > ${path.join(work, "two.txt")}`)),
          Fake.tools(Fake.bash(`echo plain > ${path.join(work, "plain.txt")}`)),
          Fake.text("done")
        ][r.turn],
      "sj-ask-",
      (s) => {
        work = s.work
        return {
          journalSession: "cc-ask",
          claude: bin!,
          cwd: s.work,
          env: Cli.offlineEnv(s.api, s.home),
          guard: compiled,
          policyName: "ask.json",
          approve: (approval) =>
            Effect.sync(() => {
              asked.push(approval)
              return asked.length === 1 ? { allow: true } : { allow: false, message: "the person says no" }
            }),
          args: ["--tools", "Bash", "--allowedTools", "Bash"]
        }
      },
      (session, s) =>
        Effect.gen(function*() {
          yield* session.send({ text: "run three" })
          const result = yield* session.awaitResultAfter(0)
          assert.strictEqual(result.subtype, "success")
          assert.deepStrictEqual(asked.map((a) => a.toolName), ["Bash", "Bash"])
          assert.include(asked[0]!.reason, "[ask(\"Bash(echo asked*)\")]")
          assert.isTrue(fs.existsSync(path.join(s.work, "one.txt")), "the approved call did not run")
          assert.isFalse(fs.existsSync(path.join(s.work, "two.txt")), "the refused call ran")
          assert.isTrue(fs.existsSync(path.join(s.work, "plain.txt")), "the call no rule asks about did not run")
          assert.include(JSON.stringify(s.api.requests.map((r) => r.messages)), "the person says no")
          const entries = yield* Harness.entriesOf("cc-ask")
          const decisions = entries.filter((e) => e.kind === Hook.DECISION_KIND).map(payloadOf)
          assert.deepStrictEqual(decisions.map((d) => d["verdict"]), ["ask", "ask", "allow"])
          const tools = entries.filter(Entry.isTool)
          assert.deepStrictEqual(tools.map((t) => t.allowed), [true, true, true])
        })
    )
  })

  it.live("without approve no one can be asked: the call is denied saying approval was needed", () => {
    let work = ""
    return Harness.withSession(
      (r) => [Fake.tools(Fake.bash(`echo asked > ${path.join(work, "asked.txt")}`)), Fake.text("done")][r.turn],
      "sj-ask-",
      (s) => {
        work = s.work
        return {
          journalSession: "cc-ask-none",
          claude: bin!,
          cwd: s.work,
          env: Cli.offlineEnv(s.api, s.home),
          guard: compiled,
          args: ["--tools", "Bash", "--allowedTools", "Bash"]
        }
      },
      (session, s) =>
        Effect.gen(function*() {
          yield* session.send({ text: "run it" })
          yield* session.awaitResultAfter(0)
          assert.isFalse(fs.existsSync(path.join(s.work, "asked.txt")), "the asked call ran")
          assert.include(JSON.stringify(s.api.requests.map((r) => r.messages)), "approval was needed")
          const decisions = (yield* Harness.entriesOf("cc-ask-none")).filter((e) => e.kind === Hook.DECISION_KIND)
          assert.deepStrictEqual(decisions.map((d) => payloadOf(d)["verdict"]), ["deny"])
        })
    )
  })
})
