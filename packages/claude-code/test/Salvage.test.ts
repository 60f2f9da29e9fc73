/**
 * Hook inputs that cannot be journaled as is: the top-level scan (its values and
 * sizes match a parse of the same text, whatever the chunking), and a PostToolUse
 * whose response is too deep, not well-formed text, not UTF-8 or too large is
 * decoded as an outcome marker whose bytes still reach the counters, while a
 * PreToolUse is still refused.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Entry } from "@session-journal/core"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Hook } from "../src/index.ts"
import * as TopLevel from "../src/internal/topLevel.ts"

// The scanner's running SHA-256, as the command hook gives it.
const hash = (): TopLevel.Hash => {
  const h = sha256.create()
  return { update: (bytes) => h.update(bytes), hex: () => bytesToHex(h.digest()) }
}

const encoder = new TextEncoder()
const utf8 = (s: string) => encoder.encode(s).length

const common = {
  session_id: "0b5c9da4-61e6-438c-8641-7d35b2b57c17",
  transcript_path: "/home/u/.claude/projects/-w/0b5c9da4-61e6-438c-8641-7d35b2b57c17.jsonl",
  cwd: "/w"
}

// A PostToolUse as Claude Code writes it: tool_use_id after the response.
const post = (response: string, extra = "") =>
  `{"session_id":"${common.session_id}","transcript_path":"${common.transcript_path}","cwd":"/w",` +
  `"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"cat big"},` +
  `"tool_response":${response},"tool_use_id":"toolu_1","duration_ms":12${extra}}`

describe("the top-level scan", () => {
  it("finds every top-level value and its size as a parse does, however the bytes are chunked", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 6 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        fc.boolean(),
        (object, cuts, pretty) => {
          const text = JSON.stringify(object, null, pretty ? 2 : undefined)
          const bytes = encoder.encode(text)
          const scanner = new TopLevel.Scanner(hash())
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
          let at = 0
          for (const p of [...points, bytes.length]) {
            scanner.push(bytes.subarray(at, p))
            at = p
          }
          const found = scanner.finish()
          expect(found.complete).toBe(true)
          expect(found.bytes).toBe(bytes.length)
          for (const [key, value] of Object.entries(object)) {
            expect(found.sizes.get(key)).toBe(utf8(
              JSON.stringify(value, null, pretty ? 2 : undefined)
                .replaceAll("\n", pretty ? "\n  " : "\n")
            ))
            if (typeof value === "string") {
              const raw = found.values.get(key)!
              expect(JSON.parse(`"${new TextDecoder().decode(raw.raw)}"`)).toBe(value)
            }
          }
        }
      ),
      { numRuns: 300 }
    )
  })

  it("keeps the first 256 keys of an input with many more", () => {
    const s = new TopLevel.Scanner(hash())
    s.push(encoder.encode("{"))
    for (let i = 0; i < 100_000; i++) s.push(encoder.encode(`"k${i}":"v",`))
    s.push(encoder.encode("\"last\":1}"))
    const found = s.finish()
    expect(found.complete).toBe(true)
    expect(found.sizes.size).toBe(256)
    expect(found.values.size).toBe(256)
  })

  it("is not complete for a cut or trailing input", () => {
    for (const text of ["{\"a\":1", "{\"a\":[1,2]", "{} x", "[1]", "{\"a\" 1}"]) {
      const s = new TopLevel.Scanner(hash())
      s.push(encoder.encode(text))
      expect(s.finish().complete, text).toBe(false)
    }
  })
})

describe("an outcome that cannot be journaled as is", () => {
  const cases: Array<[string, Uint8Array]> = [
    ["nested 300 deep", encoder.encode(post("[".repeat(300) + "]".repeat(300)))],
    ["a lone surrogate", encoder.encode(post("{\"stdout\":\"a\\ud800b\",\"stderr\":\"\"}"))],
    [
      "bytes that are not UTF-8",
      encoder.encode(post("{\"stdout\":\"\u0000\"}")).map((b) => b === 0 ? 0xff : b)
    ]
  ]
  for (const [what, bytes] of cases) {
    it(`${what}: a marker with the response's size, counted as read`, () => {
      const decoded = Hook.decode(bytes)
      expect(Result.isSuccess(decoded), what).toBe(true)
      const event = Result.getOrThrow(decoded)
      expect(event.name).toBe("Unrecorded")
      if (event.name !== "Unrecorded") return
      expect(event.input.tool_use_id).toBe("toolu_1")
      expect(event.input.duration_ms).toBe(12)
      expect(event.inputBytes).toBe(bytes.length)
      const { kind, payload } = Hook.entryOf(event)
      expect(kind).toBe(Entry.OUTCOME_KIND)
      expect(Entry.validatePayload(kind, payload)._tag).toBe("Success")
      expect(Entry.outcomeBytes(payload as never).read).toBeGreaterThan(0)
      expect((payload as { not_recorded: string }).not_recorded).not.toBe("")
    })
  }

  it("a PreToolUse that cannot be journaled is still refused", () => {
    const text = post("1").replace("PostToolUse", "PreToolUse").replace(
      "\"cat big\"",
      "[".repeat(300) + "]".repeat(300)
    )
    const decoded = Hook.decodeText(text)
    expect(Result.isFailure(decoded)).toBe(true)
  })

  it("over the bound: scanned as it streams, its whole response counted", () => {
    const big = `{"stdout":"${"x".repeat(200_000)}","stderr":""}`
    const bytes = encoder.encode(post(big))
    const salvager = new Hook.Salvager()
    for (let at = 0; at < bytes.length; at += 4096) salvager.push(bytes.subarray(at, at + 4096))
    expect(salvager.event).toBe("PostToolUse")
    const event = Result.getOrThrow(salvager.salvage("over the bound"))
    expect(event.name === "Unrecorded" ? event.responseBytes : -1).toBe(utf8(big))
    expect(Hook.decode(bytes, { maxBytes: 1000 })._tag).toBe("Success")
  })
})

describe("a scan sent on (the forwarder to the guard)", () => {
  const salvaged = (bytes: Uint8Array, maxBytes: number) => {
    const salvager = new Hook.Salvager()
    salvager.push(bytes)
    return salvager.salvage(Hook.overBound(maxBytes))
  }
  const sent = (bytes: Uint8Array, maxBytes: number) => {
    const scanner = new TopLevel.Scanner(hash())
    scanner.push(bytes)
    return Hook.decodeScan(encoder.encode(JSON.stringify(TopLevel.toWire(scanner.finish()))), maxBytes)
  }
  const same = (a: Result.Result<Hook.HookEvent, Hook.HookError>, b: typeof a) => {
    expect(a._tag).toBe(b._tag)
    if (Result.isSuccess(a) && Result.isSuccess(b)) expect(b.success).toEqual(a.success)
    if (Result.isFailure(a) && Result.isFailure(b)) {
      expect([b.failure.reason, b.failure.detail, b.failure.event]).toEqual([
        a.failure.reason,
        a.failure.detail,
        a.failure.event
      ])
    }
  }

  it("is salvaged exactly as the input itself would be, whatever the input", () => {
    const text = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom("a\ud800b", "\u0000", "x\"y\\z", "😀"))
    const value = fc.oneof(
      text,
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.jsonValue({ maxDepth: 3 })
    )
    const fields = fc.record({
      session_id: fc.oneof(fc.constant("0b5c9da4-61e6-438c-8641-7d35b2b57c17"), value),
      cwd: fc.oneof(fc.constant("/w"), value),
      hook_event_name: fc.oneof(fc.constantFrom("PostToolUse", "PostToolUseFailure", "PreToolUse"), value),
      tool_name: fc.oneof(fc.constant("Bash"), value),
      tool_use_id: fc.oneof(fc.constant("toolu_1"), value),
      transcript_path: value,
      agent_id: value,
      duration_ms: value,
      is_interrupt: value,
      tool_response: value,
      error: value,
      other: value
    }, { requiredKeys: [] })
    fc.assert(
      fc.property(fields, fc.boolean(), (object, cut) => {
        const whole = encoder.encode(JSON.stringify(object))
        const bytes = cut ? whole.subarray(0, Math.floor(whole.length / 2)) : whole
        const maxBytes = Math.max(0, bytes.length - 1)
        same(salvaged(bytes, maxBytes), sent(bytes, maxBytes))
      }),
      { numRuns: 500 }
    )
  })

  it("a scan of an input within the bound, or anything that is not a scan, is refused", () => {
    const bytes = encoder.encode(post(`{"stdout":"${"x".repeat(5000)}","stderr":""}`))
    expect(Result.isSuccess(sent(bytes, 1000))).toBe(true)
    expect(Result.isFailure(sent(bytes, bytes.length))).toBe(true)
    const scanner = new TopLevel.Scanner(hash())
    scanner.push(bytes)
    const wire = TopLevel.toWire(scanner.finish())
    const bad: Array<unknown> = [
      null,
      [],
      { ...wire, extra: 1 },
      { ...wire, bytes: -1 },
      { ...wire, sha256: "ABC" },
      { ...wire, values: { ...wire.values, tool_input: { raw: "", string: true } } },
      { ...wire, values: { ...wire.values, cwd: { raw: "not base64!", string: true } } },
      { ...wire, values: { ...wire.values, cwd: { raw: "L3c", string: true } } },
      { ...wire, sizes: { tool_response: 1.5 } }
    ]
    for (const b of bad) {
      expect(TopLevel.fromWire(b), JSON.stringify(b)).toBeNull()
      expect(Result.isFailure(Hook.decodeScan(encoder.encode(JSON.stringify(b)), 1000))).toBe(true)
    }
    expect(TopLevel.fromWire(JSON.parse(JSON.stringify(wire)))).toEqual(TopLevel.fromWire(wire))
  })
})
