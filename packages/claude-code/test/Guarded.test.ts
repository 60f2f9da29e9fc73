/**
 * Every tool call decided, against the real Claude Code CLI 2.1.328 offline (the
 * fake Messages API of @session-journal/claude-code's tests): the driver
 * registers hook callbacks for PreToolUse, PostToolUse and PostToolUseFailure
 * (every tool) before the first prompt, so calls the CLI runs without asking
 * (`--allowedTools`) are decided too. Read, Glob and Grep on the deny list never
 * run and the model never sees the file; a pre-allowed Bash that a transition
 * forbids never runs; each denial reaches the model with its guard in brackets
 * and the chain holds the tool entry with the `claude-code.decision` entry
 * beside it; a call the CLI asks about through `can_use_tool` after its
 * PreToolUse callback allowed it is answered from that decision and recorded
 * once, with its outcome; a sub-agent's call is decided with its agent id.
 *
 * With stand-ins for the CLI (small scripts given as `claude`): a line of 64 MiB
 * without a newline is journaled as an oversized marker with its size and
 * SHA-256 while the splitter never holds more than the line bound, and the
 * session goes on with the next lines; control requests above the bound are
 * refused from their heads; a CLI that never answers `initialize`
 * is ended and the prompt waiting on it fails, so nothing runs unguarded; a hook callback whose
 * input cannot be decoded is answered with a refusal (a deny for PreToolUse),
 * on the chain before it is written; a `can_use_tool` with no hook decision
 * before it is decided through the same pipeline; and when the journal cannot record a
 * decision (a fault injected into its append), nothing is answered: the
 * session ends with the CLI's process, so the call never runs.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import { Entry, Policy, SessionJournal } from "@session-journal/core"
import * as Instrumented from "@session-journal/core/test/InstrumentedPersistence"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as Hook from "../src/Hook.ts"
import { Message, Session } from "../src/index.ts"
import * as Cli from "./claudeCli.ts"
import * as Fake from "./fakeApi.ts"
import * as Harness from "./harness.ts"
import type { Setup } from "./harness.ts"

afterAll(() => Cli.cleanup())

const bin = Cli.CLAUDE_BIN

const policyOf = (json: unknown) => {
  const policy = Result.getOrThrow(Policy.decodeText(JSON.stringify(json)))
  return { guard: Policy.toGuard(policy), policyName: Policy.format(policy) }
}

const withSession = <A, E>(
  script: Fake.Script,
  over: (s: Setup) => Partial<Session.Options>,
  body: (session: Session.Session, s: Setup) => Effect.Effect<A, E, SessionJournal.SessionJournal | Scope.Scope>
) =>
  Harness.withSession(script, "sj-guarded-", (s) => ({
    journalSession: "cc-guarded",
    claude: bin!,
    cwd: s.work,
    env: Cli.offlineEnv(s.api, s.home),
    ...over(s)
  }), body)

const { entriesOf, journalLayer } = Harness

type Payload = { readonly [key: string]: unknown }
const payloadOf = (e: Entry.Entry): Payload =>
  "payload" in e && typeof e.payload === "object" && e.payload !== null ? e.payload as Payload : {}

/** The driver's and the CLI's lines on the chain, decoded. */
const linesOf = (entries: ReadonlyArray<Entry.Entry>) =>
  entries.flatMap((e) => {
    if (e.kind !== Session.LINE_KIND) return []
    const p = payloadOf(e)
    return typeof p["line"] === "string"
      ? [{ from: p["from"] as string, message: Message.decodeLine(p["line"]) }]
      : []
  })

describe.skipIf(bin === null)("every tool call decided, against the real CLI", () => {
  it.live(
    "pre-allowed Read, Glob and Grep on the deny list never run; a pre-allowed Bash a transition forbids never runs",
    () => {
      let work = ""
      const secret = "the-secret-content-8f2d"
      return withSession(
        (r) =>
          [
            Fake.tools(
              { name: "Read", input: { file_path: path.join(work, "secret.txt") } },
              { name: "Glob", input: { pattern: "*.txt" } },
              { name: "Grep", input: { pattern: "secret", path: work, output_mode: "content" } }
            ),
            Fake.tools(Fake.bash(`echo one > ${path.join(work, "one.txt")}`)),
            Fake.tools(Fake.bash(`echo two > ${path.join(work, "two.txt")}`)),
            Fake.text("done")
          ][r.turn],
        (s) => {
          work = s.work
          fs.writeFileSync(path.join(s.work, "secret.txt"), `${secret}\n`)
          return {
            ...policyOf([{ denyList: ["Read", "Glob", "Grep"] }, { forbiddenTransitions: [["Bash", "Bash"]] }]),
            args: ["--tools", "Bash,Read,Glob,Grep", "--allowedTools", "Bash,Read,Glob,Grep"]
          }
        },
        (session, s) =>
          Effect.gen(function*() {
            yield* session.send({ text: "look around" })
            const result = yield* session.awaitResultAfter(0)
            assert.strictEqual(result.subtype, "success")
            const told = JSON.stringify(s.api.requests.map((r) => r.messages))
            assert.notInclude(told, secret, "the model saw the denied file")
            for (const tool of ["Read", "Glob", "Grep"]) {
              assert.include(told, `${tool} is on the deny list [denyList([\\"${tool}\\"])]`)
            }
            assert.isTrue(fs.existsSync(path.join(s.work, "one.txt")), "the allowed Bash did not run")
            assert.isFalse(fs.existsSync(path.join(s.work, "two.txt")), "the forbidden Bash ran")
            assert.include(told, "Bash may not follow Bash [forbiddenTransitions")

            const entries = yield* entriesOf("cc-guarded")
            const tools = entries.filter(Entry.isTool)
            assert.deepStrictEqual(
              tools.map((t) => [t.tool_name, t.allowed]).sort(),
              [["Bash", false], ["Bash", true], ["Glob", false], ["Grep", false], ["Read", false]]
            )
            const decisions = entries.filter((e) => e.kind === Hook.DECISION_KIND).map(payloadOf)
            assert.strictEqual(decisions.length, 5)
            assert.isTrue(decisions.every((d) => typeof d["tool_use_id"] === "string"))
            assert.strictEqual(decisions.filter((d) => d["verdict"] === "deny").length, 4)
            assert.isTrue(
              decisions.every((d) =>
                d["policy"] === `all(denyList(["Read","Glob","Grep"]), forbiddenTransitions([["Bash","Bash"]]))`
              ),
              JSON.stringify(decisions)
            )
            // The allowed Bash has its outcome.
            const outcomes = entries.filter((e) => e.kind === Entry.OUTCOME_KIND).map(payloadOf)
            assert.deepStrictEqual(outcomes.map((o) => o["tool_name"]), ["Bash"])
            // The hook callbacks and their answers are lines on the chain too.
            const lines = linesOf(entries)
            const callbacks = lines.filter((l) =>
              l.from === "cli" && l.message._tag === "ControlRequest" && l.message.request.subtype === "hook_callback"
            )
            assert.isAtLeast(callbacks.length, 6)
            const first = lines.findIndex((l) => l.from === "driver" && l.message._tag === "User")
            const init = lines.findIndex((l) =>
              l.from === "driver" && l.message._tag === "ControlRequest" && l.message.request.subtype === "initialize"
            )
            assert.isTrue(init >= 0 && init < first, `initialize ${init}, first prompt ${first}`)
          })
      ).pipe(Effect.timeout("120 seconds"))
    }
  )

  it.live(
    "a denied Write tells the model its guard; a call the CLI asks about after its hook allowed it is recorded once",
    () => {
      let work = ""
      return withSession(
        (r) =>
          [
            Fake.tools({ name: "Write", input: { file_path: path.join(work, "w.txt"), content: "no\n" } }),
            Fake.tools(Fake.bash(`echo asked > ${path.join(work, "asked.txt")}; echo asked-out`)),
            Fake.text("done")
          ][r.turn],
        (s) => {
          work = s.work
          return {
            ...policyOf({ denyList: ["Write"] }),
            // Bash is not pre-allowed: the CLI asks through can_use_tool after the hook.
            args: ["--tools", "Bash,Write", "--allowedTools", "Read"]
          }
        },
        (session, s) =>
          Effect.gen(function*() {
            yield* session.send({ text: "write it" })
            const result = yield* session.awaitResultAfter(0)
            assert.strictEqual(result.subtype, "success")
            assert.isFalse(fs.existsSync(path.join(s.work, "w.txt")), "the denied Write ran")
            assert.isTrue(fs.existsSync(path.join(s.work, "asked.txt")), "the allowed Bash did not run")
            const told = s.api.requests.flatMap((r) => r.toolResults).map((b) => JSON.stringify(b))
            assert.isTrue(
              told.some((t) => t.includes(`Write is on the deny list [denyList([\\"Write\\"])]`)),
              told.join("\n")
            )
            const entries = yield* entriesOf("cc-guarded")
            const writeAt = entries.findIndex((e) => Entry.isTool(e) && e.tool_name === "Write")
            const write = entries[writeAt]!
            assert.isTrue(Entry.isTool(write) && write.allowed === false)
            const beside = entries[writeAt + 1]!
            assert.strictEqual(beside.kind, Hook.DECISION_KIND)
            assert.deepStrictEqual(
              [payloadOf(beside)["verdict"], payloadOf(beside)["guard"], payloadOf(beside)["reason"]],
              ["deny", `denyList(["Write"])`, "Write is on the deny list"]
            )
            // Bash: one tool entry, one decision, one outcome; the can_use_tool answer allowed it.
            assert.strictEqual(entries.filter((e) => Entry.isTool(e) && e.tool_name === "Bash").length, 1)
            assert.strictEqual(
              entries.filter((e) => e.kind === Hook.DECISION_KIND && payloadOf(e)["tool_name"] === "Bash").length,
              1
            )
            const outcome = entries.find((e) => e.kind === Entry.OUTCOME_KIND)
            assert.isDefined(outcome)
            assert.strictEqual(payloadOf(outcome!)["bytes_read"], "asked-out".length)
            const lines = linesOf(entries)
            const asked = lines.find((l) =>
              l.message._tag === "ControlRequest" && l.message.request.subtype === "can_use_tool"
            )
            assert.isDefined(asked, "the CLI did not ask about Bash")
            const id = asked!.message._tag === "ControlRequest" ? asked!.message.request_id : ""
            const answer = lines.find((l) =>
              l.from === "driver" && l.message._tag === "ControlResponse" && l.message.response.request_id === id
            )
            assert.strictEqual(
              answer?.message._tag === "ControlResponse"
                ? (answer.message.response.response as Payload)["behavior"]
                : undefined,
              "allow"
            )
          })
      ).pipe(Effect.timeout("120 seconds"))
    }
  )

  it.live("a sub-agent's calls are decided too, with the hook input passed on: its agent id on the chain", () => {
    let work = ""
    return withSession(
      Fake.perConversation((r) =>
        r.prompt.includes("SUBTASK")
          ? [Fake.tools(Fake.bash(`echo from-sub > ${path.join(work, "sub.txt")}`)), Fake.text("sub done")]
          : [
            Fake.tools({
              name: "Agent",
              input: {
                description: "Run one command",
                prompt: "SUBTASK: run the command",
                subagent_type: "general-purpose",
                run_in_background: false
              }
            }),
            Fake.text("main done")
          ]
      ),
      (s) => {
        work = s.work
        return {
          ...policyOf({ denyList: ["Bash"] }),
          args: ["--tools", "Bash,Agent", "--allowedTools", "Bash,Agent"]
        }
      },
      (session, s) =>
        Effect.gen(function*() {
          yield* session.send({ text: "delegate it" })
          const result = yield* session.awaitResultAfter(0)
          assert.strictEqual(result.subtype, "success")
          assert.isFalse(fs.existsSync(path.join(s.work, "sub.txt")), "the sub-agent's denied Bash ran")
          const entries = yield* entriesOf("cc-guarded")
          const bash = entries.find((e) => Entry.isTool(e) && e.tool_name === "Bash")
          assert.isDefined(bash, "the sub-agent's call is not on the chain")
          assert.isTrue(Entry.isTool(bash!) && bash.allowed === false && bash.agent_id !== "main")
          const decision = entries.map(payloadOf).find((p) => p["tool_name"] === "Bash" && "verdict" in p)
          assert.strictEqual(decision?.["verdict"], "deny")
          assert.strictEqual(decision?.["agent_type"], "general-purpose")
          assert.strictEqual(decision?.["agent_id"], Entry.isTool(bash!) ? bash.agent_id : undefined)
          // The Agent call itself was decided in the main agent.
          const agent = entries.find((e) => Entry.isTool(e) && e.tool_name === "Agent")
          assert.isTrue(agent !== undefined && Entry.isTool(agent) && agent.agent_id === "main" && agent.allowed)
        })
    ).pipe(Effect.timeout("120 seconds"))
  })
})

/** A stand-in CLI: a Node script given as `claude`. */
const standIn = (root: string, name: string, source: string): string => {
  const script = path.join(root, `${name}.js`)
  fs.writeFileSync(script, source)
  const exe = path.join(root, name)
  fs.writeFileSync(exe, `#!/bin/sh\nexec '${process.execPath}' '${script}' "$@"\n`, { mode: 0o755 })
  return exe
}

/** Stand-in source: answers `initialize`, then runs `then` (a function body with `send` and `lines`). */
const answeringInitialize = (then: string) =>
  `const rl = require("node:readline").createInterface({ input: process.stdin });
const send = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
const lines = [];
rl.on("line", (l) => {
  const m = JSON.parse(l);
  lines.push(m);
  if (m.type === "control_request" && m.request.subtype === "initialize") {
    send({ type: "control_response", response: { subtype: "success", request_id: m.request_id, response: {} } });
    (async () => { ${then} })();
  }
});
`

const runStandIn = <A, E>(
  name: string,
  source: string,
  options: Partial<Session.Options>,
  body: (session: Session.Session, root: string) => Effect.Effect<A, E, SessionJournal.SessionJournal | Scope.Scope>
) =>
  Effect.gen(function*() {
    const root = Cli.tempDir("sj-standin-")
    const exe = standIn(root, name, source)
    return yield* Effect.gen(function*() {
      const session = yield* Session.make({ journalSession: "standin", claude: exe, ...options })
      return yield* body(session, root)
    }).pipe(Effect.scoped, Effect.provide(journalLayer(root)))
  })

describe("the driver with stand-ins for the CLI", () => {
  it.live("a 64 MiB line without a newline is a marker with its size and hash; the splitter stays bounded", () => {
    const huge = 64 * 1024 * 1024
    const bound = 1024 * 1024
    // The line: 'x' repeated, written in 1 MiB pieces without a newline, then a newline and normal lines.
    const expected = crypto.createHash("sha256")
    const piece = Buffer.alloc(1024 * 1024, "x")
    for (let i = 0; i < huge / piece.length; i++) expected.update(piece)
    const sha256 = expected.digest("hex")
    return runStandIn(
      "huge-claude",
      answeringInitialize(`
const piece = Buffer.alloc(1024 * 1024, "x");
for (let i = 0; i < ${huge / (1024 * 1024)}; i++) {
  if (!process.stdout.write(piece)) await new Promise((r) => process.stdout.once("drain", r));
}
process.stdout.write("\\n");
send({ type: "system", subtype: "notification", text: "after the huge line" });
send({ type: "result", subtype: "success", is_error: false, total_cost_usd: 0 });
process.stdin.pause(); rl.close();
`),
      { maxLineBytes: bound },
      (session) =>
        Effect.gen(function*() {
          const result = yield* session.awaitResultAfter(0)
          assert.strictEqual(result.subtype, "success")
          const buffer = yield* session.lineBuffer
          // Held bytes never went past the bound plus one chunk's worth of head.
          assert.isAtMost(buffer.peak, bound + 64 * 1024, JSON.stringify(buffer))
          assert.strictEqual(buffer.held, 0)
          const entries = yield* entriesOf("standin")
          const marker = entries.filter((e) => e.kind === Session.OVERSIZED_KIND).map(payloadOf)
          assert.strictEqual(marker.length, 1)
          assert.deepStrictEqual([marker[0]!["from"], marker[0]!["bytes"], marker[0]!["sha256"]], ["cli", huge, sha256])
          const lines = linesOf(entries)
          assert.isTrue(lines.some((l) => JSON.stringify(Message.encode(l.message)).includes("after the huge line")))
        })
    ).pipe(Effect.timeout("120 seconds"))
  })

  it.live("a can_use_tool whose input changed since its PreToolUse was allowed is decided again, as it now is", () =>
    runStandIn(
      "rewrite-claude",
      answeringInitialize(`
const pre = lines[0].request.hooks.PreToolUse[0].hookCallbackIds[0];
send({ type: "control_request", request_id: "h-1", request: { subtype: "hook_callback", callback_id: pre,
  input: { session_id: "s", cwd: "/", hook_event_name: "PreToolUse", tool_name: "Bash",
    tool_input: { command: "echo harmless" }, tool_use_id: "toolu_rw" } } });
while (lines.filter((m) => m.type === "control_response").length < 1) await new Promise((r) => setTimeout(r, 20));
// Another hook rewrote the input before the permission check.
send({ type: "control_request", request_id: "c-1", request: { subtype: "can_use_tool", tool_name: "Bash",
  input: { command: "rm -rf /" }, tool_use_id: "toolu_rw" } });
while (lines.filter((m) => m.type === "control_response").length < 2) await new Promise((r) => setTimeout(r, 20));
send({ type: "result", subtype: "success", is_error: false, total_cost_usd: 0, answers: lines.filter((m) => m.type === "control_response") });
`),
      { guard: Policy.toGuard({ maxInvocations: 1 }), policyName: "maxInvocations(1)" },
      (session) =>
        Effect.gen(function*() {
          const result = yield* session.awaitResultAfter(0)
          const answers = (result as unknown as { answers: Array<{ response: Payload }> }).answers
          const byId = new Map(answers.map((a) => [a.response["request_id"], a.response["response"] as Payload]))
          assert.deepStrictEqual(byId.get("h-1"), {})
          assert.strictEqual(byId.get("c-1")!["behavior"], "deny", JSON.stringify(byId.get("c-1")))
          const tools = (yield* entriesOf("standin")).filter(Entry.isTool)
          assert.deepStrictEqual(tools.map((t) => t.allowed), [true, false])
        })
    ).pipe(Effect.timeout("30 seconds")))

  it.live("control requests above the line bound are refused from their heads: a deny, never left unanswered", () =>
    runStandIn(
      "big-claude",
      answeringInitialize(`
const pre = lines[0].request.hooks.PreToolUse[0].hookCallbackIds[0];
const content = "x".repeat(2 * 1024 * 1024);
send({ type: "control_request", request_id: "big-1", request: { subtype: "hook_callback", callback_id: pre,
  input: { session_id: "s", cwd: "/", hook_event_name: "PreToolUse", tool_name: "Write",
    tool_input: { file_path: "/tmp/x", content }, tool_use_id: "toolu_big" } } });
send({ type: "control_request", request_id: "big-2", request: { subtype: "can_use_tool", tool_name: "Write",
  input: { file_path: "/tmp/x", content }, tool_use_id: "toolu_big2" } });
const answered = () => lines.filter((m) => m.type === "control_response").length;
while (answered() < 2) await new Promise((r) => setTimeout(r, 20));
send({ type: "result", subtype: "success", is_error: false, total_cost_usd: 0, answers: lines.filter((m) => m.type === "control_response") });
`),
      { maxLineBytes: 1024 * 1024 },
      (session) =>
        Effect.gen(function*() {
          const result = yield* session.awaitResultAfter(0)
          const answers = (result as unknown as { answers: Array<{ response: Payload }> }).answers
          const byId = new Map(answers.map((a) => [a.response["request_id"], a.response["response"] as Payload]))
          const hook = byId.get("big-1")!["hookSpecificOutput"] as Payload
          assert.strictEqual(hook["permissionDecision"], "deny")
          assert.include(String(hook["permissionDecisionReason"]), "over the driver's line bound")
          assert.strictEqual(byId.get("big-2")!["behavior"], "deny")
          const entries = yield* entriesOf("standin")
          assert.strictEqual(entries.filter((e) => e.kind === Session.OVERSIZED_KIND).length, 2)
        })
    ).pipe(Effect.timeout("30 seconds")))

  it.live("a CLI that never answers initialize is ended and the prompt fails: no prompt is ever sent", () =>
    Effect.gen(function*() {
      const root = Cli.tempDir("sj-standin-")
      const pidFile = path.join(root, "pid")
      const exe = standIn(
        root,
        "mute-claude",
        `require("node:fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));
process.stdin.on("data", (d) => require("node:fs").appendFileSync(${JSON.stringify(path.join(root, "stdin"))}, d));`
      )
      const exit = yield* Effect.gen(function*() {
        const session = yield* Session.make({
          journalSession: "mute",
          claude: exe,
          initializeTimeout: "1 second",
          killGrace: "300 millis"
        })
        // The prompt waits for the hooks to be registered; they never are.
        return yield* Effect.flip(session.send({ text: "run unguarded" }))
      }).pipe(Effect.scoped, Effect.provide(journalLayer(root)))
      assert.strictEqual(exit._tag, "CliDied")
      assert.include(exit.message, "did not register the driver's hooks (no answer to initialize within 1s)")
      const pid = Number(fs.readFileSync(pidFile, "utf8"))
      let alive = true
      try {
        process.kill(pid, 0)
      } catch {
        alive = false
      }
      assert.isFalse(alive, "the CLI outlived a failed initialize")
      const stdin = fs.readFileSync(path.join(root, "stdin"), "utf8").trim().split("\n")
      assert.deepStrictEqual(stdin.map((l) => JSON.parse(l).request.subtype), ["initialize"])
    }).pipe(Effect.timeout("30 seconds")))

  it.live(
    "the journal failing a decision: nothing is answered, the session ends with the CLI's process",
    () =>
      Effect.gen(function*() {
        const root = Cli.tempDir("sj-standin-")
        const got = path.join(root, "stdin")
        const pidFile = path.join(root, "pid")
        // Records every line it reads; sends a PreToolUse callback once the prompt came.
        const exe = standIn(
          root,
          "failing-claude",
          `const fs = require("node:fs");
fs.writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));
const send = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
require("node:readline").createInterface({ input: process.stdin }).on("line", (l) => {
  fs.appendFileSync(${JSON.stringify(got)}, l + "\\n");
  const m = JSON.parse(l);
  if (m.type === "control_request" && m.request.subtype === "initialize") {
    send({ type: "control_response", response: { subtype: "success", request_id: m.request_id, response: {} } });
  } else if (m.type === "user") {
    const hooks = JSON.parse(fs.readFileSync(${JSON.stringify(got)}, "utf8").split("\\n")[0]).request.hooks;
    send({ type: "control_request", request_id: "cb-1", request: { subtype: "hook_callback",
      callback_id: hooks.PreToolUse[0].hookCallbackIds[0],
      input: { session_id: "s", cwd: "/", hook_event_name: "PreToolUse", tool_name: "Bash",
        tool_input: { command: "echo hi" }, tool_use_id: "toolu_1" } } });
  }
});`
        )
        const probe = Instrumented.makeProbe()
        // Appends of the session: 0 initialize, 1 its answer, 2 the prompt, 3 the
        // callback, 4 its decision, 5 the answer to it.
        Instrumented.plan(probe, "failing", 4, { _tag: "FailBefore" })
        const error = yield* Effect.gen(function*() {
          const session = yield* Session.make({ journalSession: "failing", claude: exe, killGrace: "300 millis" })
          yield* session.send({ text: "go" })
          return yield* session.ended
        }).pipe(
          Effect.scoped,
          Effect.provide(Layer.mergeAll(
            SessionJournal.layer().pipe(Layer.provide(Instrumented.layerMemory(probe))),
            NodeServices.layer
          ))
        )
        assert.strictEqual(error._tag, "SessionStorageError", String(error))
        const pid = Number(fs.readFileSync(pidFile, "utf8"))
        let alive = true
        try {
          process.kill(pid, 0)
        } catch {
          alive = false
        }
        assert.isFalse(alive, "the CLI outlived the journal's failure")
        const read = fs.readFileSync(got, "utf8").trim().split("\n").map((l) => JSON.parse(l))
        const answers = read.filter((m) => m.type === "control_response")
        assert.strictEqual(answers.length, 0, "an answer reached the CLI after the journal failed")
        assert.include(error.message, "decide on control request cb-1")
      }).pipe(Effect.timeout("30 seconds"))
  )

  it.live("a can_use_tool with no hook decision before it is decided through the same pipeline", () =>
    runStandIn(
      "asking-claude",
      answeringInitialize(`
send({ type: "control_request", request_id: "ask-1", request: { subtype: "can_use_tool", tool_name: "Write",
  input: { file_path: "/tmp/x", content: "x" }, tool_use_id: "toolu_w" } });
send({ type: "control_request", request_id: "ask-2", request: { subtype: "can_use_tool", tool_name: "Read",
  input: { file_path: "/tmp/x" }, tool_use_id: "toolu_r", agent_id: "a0123456789abcdef" } });
const answered = () => lines.filter((m) => m.type === "control_response").length;
while (answered() < 2) await new Promise((r) => setTimeout(r, 20));
send({ type: "result", subtype: "success", is_error: false, total_cost_usd: 0, answers: lines.filter((m) => m.type === "control_response") });
`),
      policyOf({ denyList: ["Write"] }),
      (session) =>
        Effect.gen(function*() {
          const result = yield* session.awaitResultAfter(0)
          const answers = (result as unknown as { answers: Array<{ response: Payload }> }).answers
          const byId = new Map(answers.map((a) => [a.response["request_id"], a.response["response"] as Payload]))
          assert.deepStrictEqual(byId.get("ask-1"), {
            behavior: "deny",
            message: `Write is on the deny list [denyList(["Write"])]`
          })
          assert.deepStrictEqual(byId.get("ask-2"), { behavior: "allow", updatedInput: { file_path: "/tmp/x" } })
          const entries = yield* entriesOf("standin")
          const tools = entries.filter(Entry.isTool)
          // Decided concurrently: in either order.
          assert.deepStrictEqual(tools.map((t) => [t.tool_name, t.allowed, t.agent_id]).sort(), [
            ["Read", true, "a0123456789abcdef"],
            ["Write", false, "main"]
          ])
          const decisions = entries.filter((e) => e.kind === Hook.DECISION_KIND).map(payloadOf)
          assert.deepStrictEqual(decisions.map((d) => [d["tool_use_id"], d["verdict"]]).sort(), [
            ["toolu_r", "allow"],
            ["toolu_w", "deny"]
          ])
        })
    ).pipe(Effect.timeout("30 seconds")))

  it.live("a hook callback that cannot be decoded is answered with the refusal, journaled before it is written", () =>
    runStandIn(
      "garbled-claude",
      answeringInitialize(`
const hooks = lines[0].request.hooks;
const pre = hooks.PreToolUse[0].hookCallbackIds[0];
const post = hooks.PostToolUse[0].hookCallbackIds[0];
send({ type: "control_request", request_id: "cb-1", request: { subtype: "hook_callback", callback_id: pre,
  input: { hook_event_name: "PreToolUse", session_id: "s", cwd: "/", tool_name: 42 } } });
send({ type: "control_request", request_id: "cb-2", request: { subtype: "hook_callback", callback_id: post, input: "nope" } });
const answered = () => lines.filter((m) => m.type === "control_response").length;
while (answered() < 2) await new Promise((r) => setTimeout(r, 20));
send({ type: "result", subtype: "success", is_error: false, total_cost_usd: 0, answers: lines.filter((m) => m.type === "control_response") });
`),
      {},
      (session) =>
        Effect.gen(function*() {
          const result = yield* session.awaitResultAfter(0)
          const answers = (result as unknown as { answers: Array<{ response: Payload }> }).answers
          const byId = new Map(answers.map((a) => [a.response["request_id"], a.response["response"] as Payload]))
          const pre = byId.get("cb-1")!
          const decision = pre["hookSpecificOutput"] as Payload
          assert.strictEqual(decision["permissionDecision"], "deny")
          assert.match(String(decision["permissionDecisionReason"]), /^session-journal: /)
          const post = byId.get("cb-2")!
          assert.strictEqual(post["decision"], "block")
          // Both answers are on the chain as the driver's lines.
          const entries = yield* entriesOf("standin")
          const driverAnswers = linesOf(entries).filter((l) =>
            l.from === "driver" && l.message._tag === "ControlResponse"
          )
          assert.strictEqual(driverAnswers.length, 2)
        })
    ).pipe(Effect.timeout("30 seconds")))
})
