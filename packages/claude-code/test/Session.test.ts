/**
 * The session driver against the real Claude Code CLI 2.1.328, offline (the fake
 * Messages API of @session-journal/claude-code's tests): a prompt gets its
 * assistant message and result; every line of both directions is on the journal
 * chain before it is published, the hooks' `initialize` first; a Bash call
 * denied by the guard never runs and the model is told the guard's reason; an
 * interrupt during a slow command settles with the CLI's answer and the turn's
 * `error_during_execution` result, and the session goes on; `info` waits for
 * `system/init`; the CLI killed with SIGKILL fails `info` and `awaitResultAfter`
 * with `CliDied`; closing the scope leaves no process behind. With the API
 * holding its response open (the CLI mid-request), an interrupt settles with the
 * CLI's answer, the CLI drops the request and the turn ends `aborted_streaming`;
 * a `send` while a turn runs is queued by the CLI and gets its own result; and
 * the result's `total_cost_usd` is the session's running total, so the state's
 * cost is the latest one, not their sum.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Guard, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { Message, Session, SessionState } from "../src/index.ts"
import * as Cli from "./claudeCli.ts"
import * as Fake from "./fakeApi.ts"
import * as Harness from "./harness.ts"
import type { Setup } from "./harness.ts"

afterAll(() => Cli.cleanup())

const bin = Cli.CLAUDE_BIN

const options = (s: Setup, over: Partial<Session.Options> = {}): Session.Options => ({
  journalSession: "cc-test",
  claude: bin!,
  cwd: s.work,
  env: Cli.offlineEnv(s.api, s.home),
  args: ["--tools", "Bash,Read", "--allowedTools", "Read"],
  ...over
})

/** Runs `body` with a session over a fresh fake API and journal. */
const withSession = <A, E>(
  script: Fake.Script,
  body: (session: Session.Session, s: Setup) => Effect.Effect<A, E, SessionJournal.SessionJournal | Scope.Scope>,
  over: Partial<Session.Options> = {}
) => Harness.withSession(script, "sj-session-", (s) => options(s, over), body)

const lineEntries = Harness.entriesOf

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe.skipIf(bin === null)("Session against the real CLI", () => {
  it.live("a prompt gets assistant + result; every line is journaled before it is published, in order", () =>
    withSession(Fake.inOrder([Fake.text("hello from the fake")]), (session) =>
      Effect.gen(function*() {
        const events = yield* session.subscribe
        const seen = yield* Effect.forkChild(Stream.runCollect(events))
        yield* session.send({ text: "say hello", context: "a note" })
        const result = yield* session.awaitResultAfter(0)
        assert.strictEqual(result.subtype, "success")
        assert.strictEqual(result.result, "hello from the fake")
        const info = yield* session.info
        const state = yield* SubscriptionRef.get(session.state)
        assert.strictEqual(state.sessionId, info.session_id)
        assert.strictEqual(state.resultsSeen, 1)
        // Everything published so far is on the chain, in the same order.
        const entries = yield* lineEntries("cc-test")
        const lines = entries.flatMap((e) =>
          e.kind === Session.LINE_KIND && "payload" in e
            ? [e.payload as { index: number; from: string; line: string }]
            : []
        )
        assert.deepStrictEqual(lines.map((l) => l.index), lines.map((_, i) => i))
        // The hooks are registered first: initialize, its answer, then the prompt.
        const first = Message.decodeLine(lines[0]!.line)
        assert.strictEqual(lines[0]!.from, "driver")
        assert.isTrue(first._tag === "ControlRequest" && first.request.subtype === "initialize")
        assert.strictEqual(lines[1]!.from, "cli")
        assert.strictEqual(Message.decodeLine(lines[1]!.line)._tag, "ControlResponse")
        assert.strictEqual(lines[2]!.from, "driver")
        assert.strictEqual(Message.decodeLine(lines[2]!.line)._tag, "User")
        assert.isTrue(lines.some((l) => l.from === "cli" && Message.decodeLine(l.line)._tag === "Assistant"))
        yield* session.end
        const all = yield* Fiber.join(seen)
        const published = all.filter((e) => e._tag === "Message")
        const from = published[0]!.index
        assert.deepStrictEqual(
          published.map((e) => e.index),
          lines.map((l) => l.index).slice(from, from + published.length)
        )
        assert.isTrue(published.some((e) => e.message._tag === "Assistant"))
      })).pipe(Effect.timeout("90 seconds")))

  it.live("a Bash call the guard denies never runs, recorded once; the model is told the guard's reason", () => {
    const marker = (w: string) => path.join(w, "ran.txt")
    let work = ""
    return withSession(
      (r) => r.turn === 0 ? Fake.tools(Fake.bash(`echo ran > ${marker(work)}`)) : Fake.text("ok"),
      (session, s) =>
        Effect.gen(function*() {
          work = s.work
          yield* session.send({ text: "run it" })
          const result = yield* session.awaitResultAfter(0)
          assert.isFalse(fs.existsSync(marker(s.work)), "the denied command ran")
          const told = s.api.requests.flatMap((r) => r.toolResults).map((b) => JSON.stringify(b))
          assert.isTrue(told.some((t) => t.includes("Bash is on the deny list")), told.join("\n"))
          assert.isAtLeast(result.permission_denials?.length ?? 0, 1)
          const entries = yield* lineEntries("cc-test")
          const tools = entries.filter(Entry.isTool)
          assert.strictEqual(tools.length, 1)
          assert.isTrue(tools[0]!.allowed === false && tools[0]!.tool_name === "Bash")
        }),
      { guard: Guard.denyList(["Bash"]) }
    ).pipe(Effect.timeout("90 seconds"))
  })

  it.live("interrupt during a slow command settles with the CLI's answer; the turn ends aborted; the next turn works", () => {
    let work = ""
    return withSession(
      Fake.perConversation((r) =>
        r.prompt.includes("slow")
          ? [Fake.tools(Fake.bash(`sleep 6; echo done > ${path.join(work, "slow-done.txt")}`)), Fake.text("after")]
          : [Fake.text("second turn")]
      ),
      (session, s) =>
        Effect.gen(function*() {
          work = s.work
          const events = yield* session.subscribe
          yield* session.send({ text: "slow" })
          // Wait for the tool call to be running (its tool_use published).
          yield* events.pipe(
            Stream.filter((e) =>
              e._tag === "Message" && e.message._tag === "Assistant" &&
              e.message.message.content.some((b) => b.type === "tool_use")
            ),
            Stream.take(1),
            Stream.runDrain
          )
          yield* Effect.sleep("1500 millis")
          const outcome = yield* session.interrupt
          assert.deepStrictEqual(outcome, { _tag: "Answered", stillQueued: [] })
          const result = yield* session.awaitResultAfter(0)
          assert.strictEqual(result.subtype, "error_during_execution")
          assert.isTrue(result.is_error)
          yield* session.send({ text: "again" })
          const second = yield* session.awaitResultAfter(1)
          assert.strictEqual(second.subtype, "success")
          assert.isFalse(fs.existsSync(path.join(s.work, "slow-done.txt")))
        }),
      { args: ["--tools", "Bash", "--allowedTools", "Bash"] }
    ).pipe(Effect.timeout("90 seconds"))
  })

  it.live("info waits for system/init; the CLI killed with SIGKILL fails info and awaitResultAfter with CliDied", () =>
    withSession(Fake.inOrder([]), (session) =>
      Effect.gen(function*() {
        const info = yield* Effect.forkChild(session.info)
        yield* Effect.sleep("300 millis")
        assert.isUndefined(info.pollUnsafe())
        process.kill(session.pid, "SIGKILL")
        const exit = yield* Fiber.await(info)
        assert.isTrue(Exit.isFailure(exit))
        const error = yield* Effect.flip(session.awaitResultAfter(0))
        assert.strictEqual(error._tag, "CliDied")
        assert.isTrue(error._tag === "CliDied" && error.signal === "SIGKILL", String(error))
        const state = yield* SubscriptionRef.get(session.state)
        assert.isTrue(SessionState.isDead(state))
        const sendError = yield* Effect.flip(session.send({ text: "late" }))
        assert.strictEqual(sendError._tag, "CliDied")
      })).pipe(Effect.timeout("60 seconds")))

  it.live("a message type the model does not know survives into events and the journal", () =>
    Effect.gen(function*() {
      // The CLI behind a wrapper that writes one line of a type from the future when
      // the first prompt comes (the CLI is idle then, so the line is whole).
      const dir = Cli.tempDir("sj-wrap-")
      const script = path.join(dir, "wrapper.js")
      fs.writeFileSync(
        script,
        `const child = require("node:child_process").spawn(${
          JSON.stringify(bin)
        }, process.argv.slice(2), { stdio: ["pipe", "inherit", "inherit"] });
let sent = false;
require("node:readline").createInterface({ input: process.stdin })
  .on("line", (l) => {
    if (!sent && l.includes('"type":"user"')) { process.stdout.write('{"type":"future_kind","x":1}\\n'); sent = true; }
    child.stdin.write(l + "\\n");
  })
  .on("close", () => child.stdin.end());
child.on("exit", (code) => process.exit(code ?? 1));`
      )
      const wrapper = path.join(dir, "claude-wrapper")
      fs.writeFileSync(wrapper, `#!/bin/sh\nexec '${process.execPath}' '${script}' "$@"\n`, { mode: 0o755 })
      return yield* withSession(Fake.inOrder([Fake.text("hi")]), (session) =>
        Effect.gen(function*() {
          const events = yield* session.subscribe
          const first = yield* Effect.forkChild(events.pipe(
            // The first line of the CLI's after the answer to initialize.
            Stream.filter((e) => e._tag === "Message" && e.from === "cli" && e.message._tag !== "ControlResponse"),
            Stream.take(1),
            Stream.runCollect
          ))
          yield* session.send({ text: "hello" })
          yield* session.awaitResultAfter(0)
          const [event] = yield* Fiber.join(first)
          assert.deepStrictEqual(event?._tag === "Message" ? event.message : undefined, {
            _tag: "Unknown",
            type: "future_kind",
            json: { type: "future_kind", x: 1 }
          })
          const state = yield* SubscriptionRef.get(session.state)
          assert.strictEqual(state.unknownSeen, 1)
          const entries = yield* lineEntries("cc-test")
          assert.isTrue(entries.some((e) => "payload" in e && JSON.stringify(e.payload).includes("future_kind")))
        }), { claude: wrapper })
    }).pipe(Effect.timeout("90 seconds")))

  it.live("with archive, the session's transcript is mirrored into its own journal session beside it", () =>
    withSession(Fake.inOrder([Fake.text("mirrored")]), (session) =>
      Effect.gen(function*() {
        yield* session.send({ text: "hello" })
        yield* session.awaitResultAfter(0)
        const info = yield* session.info
        // The follow runs on its own fiber; wait for its pass over the transcript.
        const found = yield* session.archived.pipe(
          Effect.map((a) => a.files.find((f) => f.path.endsWith(`${info.session_id}.jsonl`) && f.lines > 0)),
          Effect.repeat({ until: (f) => f !== undefined, schedule: Schedule.spaced("100 millis") }),
          Effect.timeout("20 seconds"),
          Effect.catch(() => Effect.succeed(undefined))
        )
        assert.isDefined(found, JSON.stringify(yield* session.archived))
        const journal = yield* SessionJournal.SessionJournal
        const entries = yield* Stream.runCollect(journal.entries(found!.session))
        assert.isAtLeast(entries.length, 1)
        assert.isNull((yield* session.archived).failure)
      }), { archive: { interval: "100 millis" } }).pipe(Effect.timeout("90 seconds")))

  it.live("closing the scope while a turn runs leaves no process behind", () => {
    let pid = 0
    let work = ""
    return withSession(
      () => Fake.tools(Fake.bash(`sleep 7; echo x > ${path.join(work, "late.txt")}`)),
      (session, s) =>
        Effect.gen(function*() {
          work = s.work
          pid = session.pid
          const events = yield* session.subscribe
          yield* session.send({ text: "go" })
          yield* events.pipe(
            Stream.filter((e) => e._tag === "Message" && e.message._tag === "Assistant"),
            Stream.take(1),
            Stream.runDrain
          )
        }),
      { args: ["--tools", "Bash", "--allowedTools", "Bash"] }
    ).pipe(
      Effect.andThen(Effect.sync(() => {
        assert.isFalse(alive(pid), "the CLI outlived its scope")
        // Its process group is gone too (the shell running sleep).
        let group = true
        try {
          process.kill(-pid, 0)
        } catch {
          group = false
        }
        assert.isFalse(group, "the CLI's process group outlived its scope")
      })),
      Effect.timeout("60 seconds")
    )
  })
  it.live("interrupt while the CLI is mid-request settles with the CLI's answer; the request is dropped; the next turn works", () => {
    const held = Fake.hold()
    return withSession(Fake.inOrder([held, Fake.text("second turn")]), (session) =>
      Effect.gen(function*() {
        const events = yield* session.subscribe
        const seen = yield* Effect.forkChild(Stream.runCollect(events))
        yield* session.send({ text: "first" })
        // The fake has sent message_start and holds the rest: the CLI is mid-request.
        yield* Effect.promise(() => held.started)
        const outcome = yield* session.interrupt.pipe(Effect.timeout("5 seconds"))
        assert.deepStrictEqual(outcome, { _tag: "Answered", stillQueued: [] })
        const result = yield* session.awaitResultAfter(0).pipe(Effect.timeout("5 seconds"))
        assert.strictEqual(result.subtype, "error_during_execution")
        assert.isTrue(result.is_error)
        assert.strictEqual(result.terminal_reason, "aborted_streaming")
        // The CLI hung up on the held request; it was never released.
        assert.strictEqual(yield* Effect.promise(() => held.ended), "closed")
        yield* session.send({ text: "again" })
        const second = yield* session.awaitResultAfter(1)
        assert.strictEqual(second.subtype, "success")
        assert.strictEqual(second.result, "second turn")
        yield* session.end
        // The answer is correlated with our request by its id, and the turn's end follows it.
        const messages = (yield* Fiber.join(seen)).flatMap((e) => e._tag === "Message" ? [e] : [])
        const asked = messages.findIndex((e) =>
          e.from === "driver" && e.message._tag === "ControlRequest" && e.message.request.subtype === "interrupt"
        )
        const request = messages[asked]!.message
        const answered = messages.findIndex((e) =>
          e.message._tag === "ControlResponse" && request._tag === "ControlRequest" &&
          e.message.response.request_id === request.request_id
        )
        const ended = messages.findIndex((e) => e.message._tag === "Result")
        assert.isTrue(asked >= 0 && asked < answered && answered < ended, `${asked} ${answered} ${ended}`)
        assert.isTrue(
          messages.slice(answered, ended).some((e) =>
            e.message._tag === "User" && JSON.stringify(e.message.message).includes("[Request interrupted by user]")
          )
        )
      })).pipe(Effect.timeout("90 seconds"))
  })

  it.live("a send while a turn runs is queued by the CLI: each prompt gets its own result, in order", () => {
    const held = Fake.hold()
    return withSession(Fake.inOrder([held, Fake.text("answer two")]), (session, s) =>
      Effect.gen(function*() {
        yield* session.send({ text: "one" })
        yield* Effect.promise(() => held.started)
        // The first turn is running (its request open); the second prompt goes in now.
        yield* session.send({ text: "two" })
        const before = yield* SubscriptionRef.get(session.state)
        assert.strictEqual(before.resultsSeen, 0)
        held.release(Fake.text("answer one"))
        const first = yield* session.awaitResultAfter(0)
        const second = yield* session.awaitResultAfter(1)
        assert.deepStrictEqual([first.subtype, first.result], ["success", "answer one"])
        assert.deepStrictEqual([second.subtype, second.result], ["success", "answer two"])
        const state = yield* SubscriptionRef.get(session.state)
        assert.strictEqual(state.resultsSeen, 2)
        // The second request carried the first exchange: one conversation.
        const asked = JSON.stringify(s.api.requests.at(-1)?.messages)
        assert.isTrue(asked.includes("answer one") && asked.includes("two"), asked)
      })).pipe(Effect.timeout("90 seconds"))
  })

  it.live("total_cost_usd is the session's running total: the state's cost is the latest, usage the sum of the turns", () =>
    withSession(
      Fake.inOrder([
        Fake.withUsage(Fake.text("one"), { input_tokens: 100, output_tokens: 200 }),
        Fake.withUsage(Fake.text("two"), { input_tokens: 1000, output_tokens: 2000 })
      ]),
      (session) =>
        Effect.gen(function*() {
          yield* session.send({ text: "one" })
          const first = yield* session.awaitResultAfter(0)
          yield* session.send({ text: "two" })
          const second = yield* session.awaitResultAfter(1)
          const c1 = first.total_cost_usd!
          const c2 = second.total_cost_usd!
          assert.isAbove(c1, 0)
          // Cost is linear in tokens and the second turn has ten times the first's:
          // a running total is 11× the first, a turn's own cost would be 10×.
          assert.closeTo(c2 / c1, 11, 1e-6)
          // The turn's usage is its own.
          assert.strictEqual(second.usage?.["input_tokens"], 1000)
          const state = yield* SubscriptionRef.get(session.state)
          assert.closeTo(state.costUsd, c2, 1e-12)
          assert.strictEqual(state.usage.input_tokens, 1100)
          assert.strictEqual(state.usage.output_tokens, 2200)
        })
    ).pipe(Effect.timeout("90 seconds")))
})
