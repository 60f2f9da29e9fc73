/**
 * The fake Messages API on its own (it runs without the Claude Code binary): the
 * SSE stream of a text turn and of parallel tool calls, per-conversation scripts
 * keyed by the conversation so far, recorded requests, refused CONNECTs, a
 * response held open until released or until the client hangs up, and the usage
 * a turn reports.
 */
import { assert, describe, it } from "@effect/vitest"
import * as http from "node:http"
import * as Fake from "./fakeApi.ts"

const post = async (api: Fake.FakeApi, body: unknown, sessionId = "sid-1") => {
  const res = await fetch(`${api.url}/v1/messages?beta=true`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-claude-code-session-id": sessionId },
    body: JSON.stringify(body)
  })
  const text = await res.text()
  const events = text.split("\n\n").filter((e) => e !== "").map((e) => {
    const [event, data] = e.split("\n")
    return { event: event!.replace(/^event: /, ""), data: JSON.parse(data!.replace(/^data: /, "")) }
  })
  return { status: res.status, type: res.headers.get("content-type"), events }
}

const user = (content: unknown) => ({ role: "user", content })
const assistant = (content: unknown) => ({ role: "assistant", content })

describe("fake Messages API", () => {
  it("streams a text turn and parallel tool calls as the CLI expects them", async () => {
    const api = await Fake.start(Fake.inOrder([
      Fake.tools(Fake.bash("echo one"), { name: "Read", input: { file_path: "/x" }, id: "toolu_given" }),
      Fake.text("done here")
    ]))
    try {
      const first = await post(api, { model: "m", stream: true, messages: [user("go")] })
      assert.strictEqual(first.status, 200)
      assert.strictEqual(first.type, "text/event-stream")
      assert.deepStrictEqual(first.events.map((e) => e.event), [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop"
      ])
      assert.strictEqual(first.events[0]!.data.message.model, "m")
      assert.strictEqual(first.events[2]!.data.content_block.name, "Bash")
      assert.match(first.events[2]!.data.content_block.id, /^toolu_[A-Za-z0-9_]+$/)
      assert.deepStrictEqual(JSON.parse(first.events[3]!.data.delta.partial_json), {
        command: "echo one",
        description: "run a command"
      })
      assert.strictEqual(first.events[5]!.data.content_block.id, "toolu_given")
      assert.strictEqual(first.events[8]!.data.delta.stop_reason, "tool_use")

      const second = await post(api, { model: "m", stream: true, messages: [user("go")] })
      assert.strictEqual(second.events[3]!.data.delta.text, "done here")
      assert.strictEqual(second.events.at(-2)!.data.delta.stop_reason, "end_turn")
      // Past the script: "done".
      const third = await post(api, { model: "m", stream: true, messages: [user("go")] })
      assert.strictEqual(third.events[3]!.data.delta.text, "done")

      assert.strictEqual(api.requests.length, 3)
      assert.strictEqual(api.requests[0]!.sessionId, "sid-1")
      assert.deepStrictEqual(api.answers.map((a) => a.blocks.length), [2, 1, 1])
    } finally {
      await api.close()
    }
  })

  it("perConversation answers by the conversation so far, the same again for a retry", async () => {
    const api = await Fake.start(
      Fake.perConversation((r) =>
        r.prompt.includes("SUB")
          ? [Fake.text("sub done")]
          : [Fake.tools(Fake.bash("echo main")), Fake.text("main done")]
      )
    )
    try {
      const textOf = (r: Awaited<ReturnType<typeof post>>) =>
        r.events.find((e) => e.event === "content_block_delta")!.data.delta
      assert.strictEqual(
        textOf(
          await post(api, {
            stream: true,
            messages: [user([{ type: "text", text: "<reminder>" }, { type: "text", text: "main" }])]
          })
        )
          .partial_json,
        JSON.stringify({ command: "echo main", description: "run a command" })
      )
      assert.strictEqual(textOf(await post(api, { stream: true, messages: [user("SUB task")] })).text, "sub done")
      const followUp = {
        stream: true,
        messages: [
          user("main"),
          assistant([{ type: "tool_use", id: "t1", name: "Bash", input: {} }]),
          { role: "system", content: "a note in the middle" },
          user([{ type: "tool_result", tool_use_id: "t1", content: "main" }])
        ]
      }
      assert.strictEqual(textOf(await post(api, followUp)).text, "main done")
      assert.strictEqual(textOf(await post(api, followUp)).text, "main done")
      assert.deepStrictEqual(api.requests[2]!.toolResults, [{
        type: "tool_result",
        tool_use_id: "t1",
        content: "main"
      }])
      assert.strictEqual(api.requests[2]!.turn, 1)
    } finally {
      await api.close()
    }
  })

  it("refuses CONNECT and answers 404 elsewhere, recording both", async () => {
    const api = await Fake.start(Fake.inOrder([]))
    try {
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const req = http.request({
          host: "127.0.0.1",
          port: api.port,
          method: "CONNECT",
          path: "api.anthropic.com:443"
        })
        req.on("connect", (res, socket) => {
          socket.destroy()
          resolve(res.statusCode)
        })
        req.on("error", reject)
        req.end()
      })
      assert.strictEqual(status, 403)
      assert.deepStrictEqual(api.connects, ["api.anthropic.com:443"])
      const other = await fetch(`${api.url}/v1/models`)
      assert.strictEqual(other.status, 404)
      assert.strictEqual(api.requests[0]!.url, "/v1/models")
    } finally {
      await api.close()
    }
  })
  it("a held response sends message_start, then waits: release finishes it, a hang-up ends it", async () => {
    const released = Fake.hold()
    const dropped = Fake.hold()
    const api = await Fake.start(
      Fake.inOrder([released, dropped, Fake.withUsage(Fake.text("counted"), { input_tokens: 3, output_tokens: 4 })])
    )
    try {
      // Released: the events before the hold, then the rest once released.
      const pending = post(api, { model: "m", stream: true, messages: [user("go")] })
      const request = await released.started
      assert.strictEqual(request.index, 0)
      assert.deepStrictEqual(api.answers, [])
      released.release(Fake.text("let go"))
      const first = await pending
      assert.deepStrictEqual(first.events.map((e) => e.event), [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop"
      ])
      assert.strictEqual(first.events[3]!.data.delta.text, "let go")
      assert.strictEqual(await released.ended, "released")
      // Dropped: the client reads message_start and hangs up.
      const abort = new AbortController()
      const res = await fetch(`${api.url}/v1/messages`, {
        method: "POST",
        body: JSON.stringify({ stream: true, messages: [user("go")] }),
        signal: abort.signal
      })
      const reader = res.body!.getReader()
      const chunk = new TextDecoder().decode((await reader.read()).value)
      assert.match(chunk, /^event: message_start\n/)
      abort.abort()
      assert.strictEqual(await dropped.ended, "closed")
      dropped.release()
      // The usage a turn reports.
      const third = await post(api, { stream: true, messages: [user("go")] })
      assert.strictEqual(third.events[0]!.data.message.usage.input_tokens, 3)
      assert.strictEqual(third.events.at(-2)!.data.usage.output_tokens, 4)
      assert.deepStrictEqual(api.answers.map((a) => a.request), [0, 2])
    } finally {
      await api.close()
    }
  })
})
