/**
 * The message model: decoding is total (every JSON value and every non-JSON line
 * becomes a message, and encoding gives the same JSON back), decode∘encode is the
 * identity on messages, absent and null stay apart, and the captured lines of
 * PROTOCOL.md (d) decode as their types.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Message } from "../src/index.ts"

const Wire = Schema.Union([
  Message.SystemInitWire,
  Message.SystemWire,
  Message.AssistantWire,
  Message.UserWire,
  Message.ResultWire,
  Message.StreamEventWire,
  Message.ControlRequestWire,
  Message.ControlResponseWire,
  Message.ControlCancelRequestWire,
  Message.KeepAliveWire
])

const runs = (n: number) => (process.env["STRESS"] ? n * 20 : n)

describe("Message", () => {
  it.prop(
    "property: decode(encode(m)) is m for messages of every known schema",
    { wire: Arbitrary.schema(Wire) },
    ({ wire }) => {
      const m = Message.decode(wire as Schema.Json)
      assert.deepStrictEqual(Message.decode(Message.encode(m)), m)
      // A wire value that fits its schema is never demoted to Unknown (unless it
      // carries a `_tag`, which the CLI never writes).
      if (!Object.hasOwn(wire, "_tag")) assert.notStrictEqual(m._tag, "Unknown")
    },
    { arbitrary: { runs: runs(300) } }
  )

  it("property: decoding is total and keeps every JSON value exactly", () => {
    const typed = fc.record({
      type: fc.oneof(fc.constantFrom(...Object.keys(Message.wires), "mystery", "_tag"), fc.string()),
      subtype: fc.oneof(fc.constant("init"), fc.string()),
      message: fc.jsonValue(),
      request: fc.jsonValue()
    }, { requiredKeys: ["type"] })
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), typed), (json) => {
        const line = JSON.stringify(json)
        const m = Message.decodeLine(line)
        assert.deepStrictEqual(JSON.parse(Message.encodeLine(m)), JSON.parse(line))
        assert.deepStrictEqual(Message.decode(Message.encode(m)), m)
      }),
      { numRuns: runs(500) }
    )
  })

  it("property: decodeLine gives what decode of the parsed line gives, keys in the same order", () => {
    // decodeLine takes a direct path for the shapes the CLI writes; the schemas
    // are the reference, down to the order of the keys of every object.
    const same = (line: string) => {
      const direct = Message.decodeLine(line)
      const reference = Message.decode(JSON.parse(line))
      assert.strictEqual(JSON.stringify(direct), JSON.stringify(reference), line)
      assert.deepStrictEqual(direct, reference)
    }
    const block = fc.oneof(
      fc.record({ type: fc.constant("text"), text: fc.oneof(fc.string(), fc.integer()), z: fc.jsonValue() }, {
        requiredKeys: ["type"]
      }),
      fc.record({
        id: fc.oneof(fc.string(), fc.constant(null)),
        type: fc.constant("tool_use"),
        name: fc.string(),
        input: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue())
      }, { requiredKeys: ["type"] }),
      fc.record({
        is_error: fc.oneof(fc.boolean(), fc.constant(null)),
        content: fc.oneof(fc.string(), fc.array(fc.jsonValue()), fc.integer()),
        tool_use_id: fc.string(),
        type: fc.constant("tool_result")
      }, { requiredKeys: ["type"] }),
      fc.record({ type: fc.oneof(fc.string(), fc.integer()), extra: fc.jsonValue() }, { requiredKeys: ["type"] }),
      fc.jsonValue()
    )
    const message = (role: string) =>
      fc.record({
        model: fc.string(),
        content: fc.oneof(fc.array(block, { maxLength: 3 }), fc.string()),
        role: fc.oneof(fc.constant(role), fc.string()),
        id: fc.string(),
        usage: fc.jsonValue()
      }, { requiredKeys: [] })
    const wire = fc.oneof(
      fc.record({
        uuid: fc.string(),
        subtype: fc.oneof(fc.constantFrom("init", "notification"), fc.string(), fc.integer()),
        type: fc.constant("system"),
        session_id: fc.oneof(fc.string(), fc.constant(null)),
        text: fc.jsonValue()
      }, { requiredKeys: ["type"] }),
      fc.record({
        session_id: fc.string(),
        message: message("assistant"),
        type: fc.constant("assistant"),
        parent_tool_use_id: fc.oneof(fc.string(), fc.constant(null), fc.integer())
      }, { requiredKeys: ["type"] }),
      fc.record({
        tool_use_result: fc.jsonValue(),
        message: message("user"),
        type: fc.constant("user"),
        uuid: fc.string()
      }, { requiredKeys: ["type"] }),
      fc.record({
        usage: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue()),
        total_cost_usd: fc.oneof(fc.double(), fc.string()),
        type: fc.constant("result"),
        is_error: fc.oneof(fc.boolean(), fc.string()),
        subtype: fc.string(),
        errors: fc.jsonValue(),
        stop_reason: fc.oneof(fc.string(), fc.constant(null))
      }, { requiredKeys: ["type"] }),
      fc.record({
        request: fc.record({ tool_name: fc.string(), subtype: fc.oneof(fc.string(), fc.integer()) }, {
          requiredKeys: []
        }),
        type: fc.constantFrom("control_request", "control_cancel_request"),
        request_id: fc.oneof(fc.string(), fc.integer())
      }, { requiredKeys: ["type"] }),
      fc.record({
        type: fc.constant("control_response"),
        response: fc.record({
          error: fc.oneof(fc.string(), fc.integer()),
          request_id: fc.string(),
          subtype: fc.string(),
          response: fc.jsonValue()
        }, { requiredKeys: [] })
      }, { requiredKeys: ["type"] }),
      fc.record({
        event: fc.record({ delta: fc.jsonValue(), type: fc.oneof(fc.string(), fc.integer()) }, { requiredKeys: [] }),
        type: fc.constantFrom("stream_event", "keep_alive"),
        _tag: fc.string(),
        parent_tool_use_id: fc.oneof(fc.string(), fc.constant(null))
      }, { requiredKeys: ["type"] })
    )
    fc.assert(fc.property(wire, (w) => same(JSON.stringify(w))), { numRuns: runs(1000) })
    // What the schemas take but the direct path must not: numbers that parse to
    // an infinity, a `__proto__` key, integer-like keys (ordered first by JS).
    same(`{"type":"system","subtype":"x","n":1e999}`)
    same(`{"type":"system","subtype":"x","n":-1E+400,"m":${"9".repeat(400)}}`)
    same(`{"type":"system","subtype":"x","__proto__":{"a":1}}`)
    same(`{"type":"keep_alive","2":1,"1":0}`)
    same(`{"type":"result","subtype":"s","is_error":false,"total_cost_usd":1e999}`)
  })

  it("property: a line that is not JSON is kept as its text", () => {
    fc.assert(
      fc.property(fc.string(), (line) => {
        const m = Message.decodeLine(line)
        assert.strictEqual(Message.encodeLine(m), m._tag === "Garbled" ? line : JSON.stringify(JSON.parse(line)))
      }),
      { numRuns: runs(300) }
    )
  })

  it("unknown types, known types of an unexpected shape and `_tag` keys are Unknown", () => {
    assert.deepStrictEqual(Message.decodeLine(`{"type":"future_thing","x":1}`), {
      _tag: "Unknown",
      type: "future_thing",
      json: { type: "future_thing", x: 1 }
    })
    assert.strictEqual(Message.decodeLine(`{"type":"assistant"}`)._tag, "Unknown")
    assert.strictEqual(Message.decodeLine(`{"type":"keep_alive","_tag":"User"}`)._tag, "Unknown")
    assert.deepStrictEqual(Message.decodeLine(`[1,2]`), { _tag: "Unknown", type: null, json: [1, 2] })
    assert.deepStrictEqual(Message.decodeLine(`not json`), { _tag: "Garbled", line: "not json" })
  })

  it("absent keys and null stay distinct", () => {
    const a = Message.decodeLine(`{"type":"user","message":{"role":"user","content":"x"},"parent_tool_use_id":null}`)
    const b = Message.decodeLine(`{"type":"user","message":{"role":"user","content":"x"}}`)
    const c = Message.decodeLine(`{"type":"user","message":{"role":"user","content":"x"},"tool_use_result":null}`)
    assert.strictEqual(a._tag, "User")
    assert.isTrue(a._tag === "User" && a.parent_tool_use_id === null)
    assert.isTrue(b._tag === "User" && !Object.hasOwn(b, "parent_tool_use_id") && !Object.hasOwn(b, "tool_use_result"))
    assert.isTrue(c._tag === "User" && Object.hasOwn(c, "tool_use_result") && c.tool_use_result === null)
    assert.notDeepEqual(a, b)
  })

  it("the captured lines of PROTOCOL.md (d) decode as their types", () => {
    const lines: Array<[string, string]> = [
      [
        `{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":["Bash"],"mcp_servers":[],"model":"claude-opus-5-5","permissionMode":"default","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.328","uuid":"u"}`,
        "SystemInit"
      ],
      [
        `{"type":"system","subtype":"hook_started","hook_id":"h","hook_name":"SessionStart:startup","hook_event":"SessionStart","uuid":"u","session_id":"s1"}`,
        "System"
      ],
      [
        `{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},"parent_tool_use_id":null,"session_id":"s1","uuid":"u"}`,
        "Assistant"
      ],
      [
        `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"turn-one","is_error":false}]},"parent_tool_use_id":null,"session_id":"s1","tool_use_result":{"stdout":"turn-one"}}`,
        "User"
      ],
      [
        `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":3,"stop_reason":"tool_use","terminal_reason":"aborted_tools","errors":["x"],"permission_denials":[],"session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":3}}`,
        "Result"
      ],
      [
        `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"P"}},"session_id":"s1","parent_tool_use_id":null,"uuid":"u"}`,
        "StreamEvent"
      ],
      [
        `{"type":"control_request","request_id":"0b5c","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"echo"},"tool_use_id":"toolu_2"}}`,
        "ControlRequest"
      ],
      [
        `{"type":"control_response","response":{"subtype":"success","request_id":"req_2","response":{"still_queued":[]}}}`,
        "ControlResponse"
      ],
      [`{"type":"control_cancel_request","request_id":"0b5c"}`, "ControlCancelRequest"],
      [`{"type":"keep_alive"}`, "KeepAlive"]
    ]
    for (const [line, tag] of lines) {
      const m = Message.decodeLine(line)
      assert.strictEqual(m._tag, tag, line)
      assert.deepStrictEqual(JSON.parse(Message.encodeLine(m)), JSON.parse(line))
    }
    const cut = Message.canUseTool(Message.decodeLine(lines[6]![0]))
    assert.deepStrictEqual(cut, {
      requestId: "0b5c",
      toolName: "Bash",
      input: { command: "echo" },
      toolUseId: "toolu_2",
      agentId: undefined
    })
  })
})
