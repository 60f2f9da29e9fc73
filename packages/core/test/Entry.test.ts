/**
 * Entries: chio's field rules (Unicode White_Space trim, no Cc, first failing field
 * named), integer ranges, session ids, payload validation, and the JSON schema's
 * round-trip law with strict refusal of anything that is not an entry.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Entry, InvalidRecordField, InvalidSessionId, JournalState } from "../src/index.ts"
import * as A from "./arbitraries.ts"

const valid: Entry.ToolParams = {
  tool_name: "read_file",
  server_id: "srv-1",
  agent_id: "agent-1",
  bytes_read: 100,
  bytes_written: 50,
  delegation_depth: 0
}

const failedField = (params: Record<string, unknown>): string | undefined => {
  const r = Entry.validateToolParams({ ...valid, ...params } as Entry.ToolParams)
  if (Result.isSuccess(r)) return undefined
  assert.instanceOf(r.failure, InvalidRecordField)
  assert.strictEqual(r.failure._tag, "InvalidRecordField")
  return r.failure.field
}

const identityFields = ["tool_name", "server_id", "agent_id"] as const

describe("Entry.validateToolParams: identity fields as chio checks them", () => {
  it("accepts valid parameters and resolves allowed to true", () => {
    const r = Result.getOrThrow(Entry.validateToolParams(valid))
    assert.strictEqual(r.allowed, true)
    assert.strictEqual(Result.getOrThrow(Entry.validateToolParams({ ...valid, allowed: false })).allowed, false)
  })

  const padded = [
    " x",
    "x ",
    "\tx",
    "x\n",
    "\rx",
    "x\u000b",
    "\u000cx",
    "\u00a0x",
    "x\u1680",
    "\u2000x",
    "x\u200a",
    "\u2028x",
    "x\u2029",
    "\u202fx",
    "x\u205f",
    "\u3000x",
    "x\u0085",
    "\u0085x"
  ]
  const empty = ["", " ", "\t\n", "\u0085", "\u3000\u00a0"]
  const controls = ["a\u0000b", "a\u0001", "\u001fb", "a\u007fb", "a\u0085b", "a\u009fb", "a\u0080b", "a\u001bb"]
  const accepted = [
    "x\ufeff",
    "\ufeffx",
    "a\ufeffb",
    "a\u200bb",
    "\u200bx",
    "a b",
    "a\u3000b",
    "é",
    "工具",
    "🔧",
    "a\u00adb",
    "x\u180e"
  ]

  for (const field of identityFields) {
    it(`${field}: padded values are rejected naming ${field}`, () => {
      for (const v of padded) assert.strictEqual(failedField({ [field]: v }), field, JSON.stringify(v))
    })
    it(`${field}: empty and whitespace-only values are rejected naming ${field}`, () => {
      for (const v of empty) assert.strictEqual(failedField({ [field]: v }), field, JSON.stringify(v))
    })
    it(`${field}: control characters (Cc, including U+0085) are rejected naming ${field}`, () => {
      for (const v of controls) assert.strictEqual(failedField({ [field]: v }), field, JSON.stringify(v))
    })
    it(`${field}: U+FEFF, U+200B and interior spaces are accepted (not White_Space, not Cc)`, () => {
      for (const v of accepted) assert.strictEqual(failedField({ [field]: v }), undefined, JSON.stringify(v))
    })
    it(`${field}: lone surrogates and non-strings are rejected naming ${field}`, () => {
      for (const v of ["a\ud800", "\udc00b", "a\udc00\ud800b", 1, null, undefined, ["x"]]) {
        assert.strictEqual(failedField({ [field]: v }), field, String(v))
      }
    })
  }

  it("the reasons differ for padding, emptiness and control characters", () => {
    const reason = (v: string) => {
      const r = Entry.validateToolParams({ ...valid, tool_name: v })
      return Result.isFailure(r) ? r.failure.reason._tag : ""
    }
    const reasons = new Set([reason(" x"), reason(""), reason("a\u0000b")])
    assert.strictEqual(reasons.size, 3)
    assert.deepStrictEqual([...reasons], ["Padded", "Blank", "ControlCharacter"])
  })

  it("trimWhiteSpace is Rust's str::trim: U+0085 is trimmed, U+FEFF is not", () => {
    assert.strictEqual(Entry.trimWhiteSpace("\u0085 x \u3000"), "x")
    assert.strictEqual(Entry.trimWhiteSpace("\ufeffx\ufeff"), "\ufeffx\ufeff")
    assert.strictEqual(Entry.trimWhiteSpace(" a b "), "a b")
  })

  it("the first failing field is named in the order tool_name, server_id, agent_id", () => {
    assert.strictEqual(failedField({ tool_name: " t", server_id: "", agent_id: "a\u0000" }), "tool_name")
    assert.strictEqual(failedField({ server_id: "", agent_id: "a\u0000" }), "server_id")
    assert.strictEqual(failedField({ agent_id: "a\u0000" }), "agent_id")
    assert.strictEqual(failedField({ agent_id: "a\u0000", bytes_read: -1 }), "agent_id")
  })

  it("property: any mix of bad fields names the first one in chio's order", () => {
    const order = ["tool_name", "server_id", "agent_id", "bytes_read", "bytes_written", "delegation_depth", "allowed"]
    const badValue: Record<string, fc.Arbitrary<unknown>> = {
      tool_name: fc.constantFrom(" x", "", "a\u0000", "\u0085"),
      server_id: fc.constantFrom("x ", "\t", "\u007f"),
      agent_id: fc.constantFrom("\u3000a", "a\u009f", ""),
      bytes_read: fc.constantFrom(-1, 1.5, Entry.MAX_U53 + 1, NaN, Infinity, "1"),
      bytes_written: fc.constantFrom(-1, 0.1, 2 ** 60, -Infinity),
      delegation_depth: fc.constantFrom(-1, Entry.MAX_U32 + 1, 2.5, NaN),
      allowed: fc.constantFrom("true", 1, null)
    }
    fc.assert(
      fc.property(
        fc.subarray(order, { minLength: 1 }).chain((fields) =>
          fc.tuple(fc.constant(fields), fc.tuple(...fields.map((f) => badValue[f]!)))
        ),
        ([fields, values]) => {
          const params = Object.fromEntries(fields.map((f, i) => [f, values[i]]))
          assert.strictEqual(failedField(params), fields[0])
        }
      )
    )
  })
})

describe("Entry.validateToolParams: integer ranges", () => {
  it("bytes_read and bytes_written are integers in 0..2^53-1", () => {
    for (const field of ["bytes_read", "bytes_written"] as const) {
      assert.strictEqual(failedField({ [field]: 0 }), undefined)
      assert.strictEqual(failedField({ [field]: Entry.MAX_U53 }), undefined)
      assert.strictEqual(Entry.MAX_U53, 2 ** 53 - 1)
      for (const bad of [-1, 2 ** 53, 2 ** 64, 0.5, 1.5, -0.5, NaN, Infinity, -Infinity, "1", 1n, null, undefined]) {
        assert.strictEqual(failedField({ [field]: bad }), field, String(bad))
      }
    }
  })

  it("delegation_depth is an integer in 0..2^32-1", () => {
    assert.strictEqual(failedField({ delegation_depth: 0 }), undefined)
    assert.strictEqual(failedField({ delegation_depth: 2 ** 32 - 1 }), undefined)
    assert.strictEqual(Entry.MAX_U32, 2 ** 32 - 1)
    for (const bad of [-1, 2 ** 32, 2 ** 53, 1.5, NaN, Infinity, "0"]) {
      assert.strictEqual(failedField({ delegation_depth: bad }), "delegation_depth", String(bad))
    }
  })

  it("property: integers in range pass, everything else fails with the field named", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(["bytes_read", Entry.MAX_U53] as const, ["delegation_depth", Entry.MAX_U32] as const),
        fc.oneof(fc.integer({ min: -(2 ** 40), max: 2 ** 40 }), fc.double(), fc.maxSafeInteger()),
        ([field, max], n) => {
          const ok = Number.isInteger(n) && n >= 0 && n <= max
          assert.strictEqual(failedField({ [field]: n }), ok ? undefined : field)
        }
      )
    )
  })

  it("allowed must be a boolean when given", () => {
    assert.strictEqual(failedField({ allowed: "yes" }), "allowed")
    assert.strictEqual(failedField({ allowed: undefined }), undefined)
  })

  it("timestamps are integers in 0..2^53-1", () => {
    assert.isTrue(Result.isSuccess(Entry.validateTimestamp(0)))
    assert.isTrue(Result.isSuccess(Entry.validateTimestamp(Entry.MAX_U53)))
    for (const bad of [-1, 1.5, 2 ** 53, NaN]) {
      const r = Entry.validateTimestamp(bad)
      assert.isTrue(Result.isFailure(r))
      if (Result.isFailure(r)) assert.strictEqual(r.failure.field, "timestamp_secs")
    }
  })

  it("the writer's timestamp rule is the decoder's: a timestamp is written only if a stored entry with it decodes", () => {
    const entry = Entry.encode(JournalState.nextOther(JournalState.empty("ts"), 0, "message", null))
    const near = (n: number) => fc.integer({ min: -3, max: 3 }).map((d) => n + d)
    fc.assert(
      fc.property(
        fc.oneof(near(0), near(Entry.MAX_U53), fc.double(), fc.integer(), fc.constantFrom(-0, NaN, Infinity, 2 ** 53)),
        (t) => {
          const written = Result.isSuccess(Entry.validateTimestamp(t))
          const stored = { ...entry, timestamp_secs: t }
          // The fast path and the schema (the entry's hash does not matter to decoding).
          assert.strictEqual(Result.isSuccess(Entry.decode(stored)), written, String(t))
          assert.strictEqual(Result.isSuccess(Entry.decodeSchema(stored)), written, String(t))
        }
      ),
      { numRuns: 2000 }
    )
  })
})

describe("Entry.validatePayload", () => {
  const field = (kind: unknown, payload: unknown) => {
    const r = Entry.validatePayload(kind as string, payload)
    return Result.isFailure(r) ? r.failure.field : undefined
  }

  it("accepts kinds matching ^[A-Za-z0-9_.:-]{1,64}$ other than tool", () => {
    for (const k of ["message", "note", "a", "x.y:z-1_2", "K".repeat(64)]) {
      assert.strictEqual(field(k, {}), undefined, k)
    }
    for (const k of ["tool", "", "K".repeat(65), "a b", "a/b", "é", "message\n", 1]) {
      assert.strictEqual(field(k, {}), "kind", String(k))
    }
  })

  it("accepts canonicalizable JSON and rejects everything else as payload", () => {
    for (const p of [null, 0, "s", [], {}, { a: [1, { b: null }] }]) assert.strictEqual(field("message", p), undefined)
    for (
      const p of [undefined, NaN, Infinity, { a: undefined }, [1, () => 1], new Date(0), 1n, "\ud800", { "\udc00": 1 }]
    ) {
      assert.strictEqual(field("message", p), "payload", String(p))
    }
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    assert.strictEqual(field("message", cyclic), "payload")
  })
})

describe("Entry session ids", () => {
  it("accepts ^[A-Za-z0-9_-]{1,128}$", () => {
    for (const id of ["a", "Z", "0", "_", "-", "session_1-A", "x".repeat(128), "CON", "--", "__proto__"]) {
      assert.isTrue(Entry.isSessionId(id), id)
      assert.deepStrictEqual(Entry.validateSessionId(id), Result.succeed(id))
    }
  })

  it("rejects hostile and malformed ids with InvalidSessionId", () => {
    const hostile = [
      "",
      "x".repeat(129),
      ".",
      "..",
      "../etc",
      "a/b",
      "a\\b",
      "/abs",
      "a b",
      "a.b",
      "abc\n",
      "\nabc",
      "a\u0000b",
      "é",
      "ａ",
      "a%2Fb",
      "C:",
      "a\u200bb",
      "a\ud800"
    ]
    for (const id of hostile) {
      assert.isFalse(Entry.isSessionId(id), JSON.stringify(id))
      const r = Entry.validateSessionId(id)
      assert.isTrue(Result.isFailure(r))
      if (Result.isFailure(r)) {
        assert.instanceOf(r.failure, InvalidSessionId)
        assert.strictEqual(r.failure.id, id)
      }
    }
    for (const id of [null, undefined, 1, {}, ["a"]]) assert.isFalse(Entry.isSessionId(id))
    const r = Entry.validateSessionId(null)
    assert.isTrue(Result.isFailure(r) && r.failure._tag === "InvalidSessionId")
  })

  it("property: the predicate agrees with the pattern on arbitrary strings", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 140 }), fc.stringMatching(/^[A-Za-z0-9_-]{0,130}$/)), (s) => {
        const expected = s.length >= 1 && s.length <= 128 && [...s].every((ch) => /[A-Za-z0-9_-]/.test(ch))
        assert.strictEqual(Entry.isSessionId(s), expected)
      })
    )
  })
})

describe("Entry.Hash", () => {
  it("property: isHash agrees with the Hash schema", () => {
    const isSchemaHash = Schema.is(Entry.Hash)
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 70 }), fc.stringMatching(/^[0-9a-fA-F]{63,65}$/), fc.anything()),
        (h) => {
          assert.strictEqual(Entry.isHash(h), isSchemaHash(h))
        }
      )
    )
  })
})

const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/)
const u53 = fc.oneof(fc.nat(100), fc.maxSafeNat())
const anyString = fc.string({ maxLength: 10, unit: "grapheme" })

const toolJson = fc.record({
  sequence: u53,
  prev_hash: hex64,
  entry_hash: hex64,
  timestamp_secs: u53,
  kind: fc.constant("tool"),
  tool_name: anyString,
  server_id: anyString,
  agent_id: anyString,
  bytes_read: u53,
  bytes_written: u53,
  delegation_depth: fc.nat(Entry.MAX_U32),
  allowed: fc.boolean()
})

const otherJson = fc.record({
  sequence: u53,
  prev_hash: hex64,
  entry_hash: hex64,
  timestamp_secs: u53,
  kind: fc.oneof(A.otherKind, fc.string({ minLength: 1, maxLength: 8, unit: "grapheme" }).filter((k) => k !== "tool")),
  payload: A.json
})

// What a JSONL reader sees: the value after a trip through JSON text.
const asParsed = <T>(x: T): T => JSON.parse(JSON.stringify(x))

describe("Entry JSON: the round-trip law", () => {
  it("encode(decode(x)) equals x for tool entries", () => {
    fc.assert(
      fc.property(toolJson, (raw) => {
        const x = asParsed(raw)
        const decoded = Entry.decode(x)
        assert.isTrue(Result.isSuccess(decoded))
        assert.deepStrictEqual(Entry.encode(Result.getOrThrow(decoded)), x)
      })
    )
  })

  it("encode(decode(x)) equals x for message and unknown kinds with arbitrary JSON payloads", () => {
    fc.assert(
      fc.property(otherJson, (raw) => {
        const x = asParsed(raw)
        const decoded = Result.getOrThrow(Entry.decode(x))
        assert.isFalse(Entry.isTool(decoded))
        assert.deepStrictEqual(Entry.encode(decoded), x)
        assert.strictEqual(JSON.stringify(Entry.encode(decoded)), JSON.stringify(x))
      })
    )
  })

  it("decodeJson of a JSONL line gives what decode gives for the parsed line", () => {
    fc.assert(
      fc.property(fc.oneof(toolJson, otherJson), (raw) => {
        const line = JSON.stringify(raw)
        const a = Result.getOrThrow(Entry.decodeJson(line))
        assert.deepStrictEqual(Entry.encode(a), JSON.parse(line))
      })
    )
  })

  it("entries built by the fold decode back to themselves and keep their hash", () => {
    fc.assert(
      fc.property(A.caps, A.ops(15), (c, list) => {
        for (const e of A.run(c, list).entries) {
          const x = asParsed(Entry.encode(e))
          const back = Result.getOrThrow(Entry.decode(x))
          assert.deepStrictEqual(Entry.encode(back), x)
          assert.strictEqual(Entry.computeHash(back), e.entry_hash)
        }
      }),
      { numRuns: A.runs(50) }
    )
  })

  it("a payload with a __proto__ key survives decoding as an own key and hashes as such", () => {
    const state = JournalState.empty("s")
    const payload = JSON.parse(`{"__proto__":{"polluted":true},"a":1}`)
    const e = JournalState.nextOther(state, 1, "message", payload)
    const x = asParsed(Entry.encode(e))
    const back = Result.getOrThrow(Entry.decode(x)) as Entry.OtherEntry
    assert.deepStrictEqual(Object.keys(back.payload as object), ["__proto__", "a"])
    assert.strictEqual(Object.getPrototypeOf(back.payload), Object.prototype)
    assert.strictEqual(Entry.computeHash(back), e.entry_hash)
    assert.strictEqual(Entry.canonicalPayload(back.payload), `{"__proto__":{"polluted":true},"a":1}`)
    assert.isUndefined(({} as Record<string, unknown>).polluted)
  })

  it("input without kind decodes to a tool entry (and encodes with kind)", () => {
    fc.assert(
      fc.property(toolJson, (raw) => {
        const { kind: _, ...x } = asParsed(raw)
        const decoded = Result.getOrThrow(Entry.decode(x))
        assert.isTrue(Entry.isTool(decoded))
        assert.deepStrictEqual(Entry.encode(decoded), { ...x, kind: "tool" })
      })
    )
  })
})

describe("Entry JSON: invalid entries fail to decode", () => {
  const tool = asParsed(Entry.encode(
    JournalState.nextTool(JournalState.empty("s"), 1_764_400_000, Result.getOrThrow(Entry.validateToolParams(valid)))
  )) as Record<string, unknown>
  const other = asParsed(
    Entry.encode(JournalState.nextOther(JournalState.empty("s"), 1, "message", { text: "hi" }))
  ) as Record<
    string,
    unknown
  >

  const invalid: ReadonlyArray<readonly [string, unknown]> = [
    ["kind tool with a payload", { ...tool, payload: { a: 1 } }],
    ["kind absent with a payload", { ...tool, kind: undefined, payload: 1 }],
    ["a message with tool fields", { ...other, tool_name: "read_file" }],
    ["an unknown extra key", { ...tool, extra: 1 }],
    ["uppercase hash", { ...tool, entry_hash: (tool.entry_hash as string).toUpperCase() }],
    ["short hash", { ...tool, prev_hash: "0".repeat(63) }],
    ["long hash", { ...tool, prev_hash: "0".repeat(65) }],
    ["non-hex hash", { ...tool, entry_hash: "g".repeat(64) }],
    ["negative sequence", { ...tool, sequence: -1 }],
    ["negative bytes_read", { ...tool, bytes_read: -1 }],
    ["negative bytes_written", { ...tool, bytes_written: -5 }],
    ["negative delegation_depth", { ...tool, delegation_depth: -1 }],
    ["negative timestamp", { ...other, timestamp_secs: -1 }],
    ["fractional bytes", { ...tool, bytes_read: 1.5 }],
    ["sequence above 2^53-1", { ...tool, sequence: 2 ** 53 }],
    ["delegation_depth above 2^32-1", { ...tool, delegation_depth: 2 ** 32 }],
    ["number as string", { ...tool, bytes_read: "1" }],
    ["allowed as string", { ...tool, allowed: "true" }],
    ["missing allowed", { ...tool, allowed: undefined }],
    ["missing tool_name", { ...tool, tool_name: undefined }],
    ["empty kind", { ...other, kind: "" }],
    ["kind tool without tool fields", { ...other, kind: "tool" }],
    ["missing payload", { ...other, payload: undefined }],
    ["non-JSON payload", { ...other, payload: NaN }],
    ["lone surrogate in payload", { ...other, payload: { a: "\ud800" } }],
    ["lone surrogate in a payload key", { ...other, payload: { "\udbff": 1 } }],
    ["lone surrogate in tool_name", { ...tool, tool_name: "a\ud800" }],
    ["lone surrogate in kind", { ...other, kind: "m\udc00" }],
    ["null", null],
    ["an array", [tool]],
    ["a string", JSON.stringify(tool)]
  ]

  for (const [name, input] of invalid) {
    it(name, () => {
      const cleaned = input !== null && typeof input === "object" && !Array.isArray(input)
        ? Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined))
        : input
      assert.isTrue(Result.isFailure(Entry.decode(cleaned)))
    })
  }

  it("the fixtures above are valid before they are broken", () => {
    assert.isTrue(Result.isSuccess(Entry.decode(tool)))
    assert.isTrue(Result.isSuccess(Entry.decode(other)))
  })

  it("decodeJson refuses broken JSON text and extra keys", () => {
    assert.isTrue(Result.isFailure(Entry.decodeJson(JSON.stringify(tool).slice(0, -1))))
    assert.isTrue(Result.isFailure(Entry.decodeJson(JSON.stringify({ ...tool, payload: 1 }))))
    assert.isTrue(Result.isSuccess(Entry.decodeJson(JSON.stringify(tool))))
  })
})

describe("Entry.isIdentity", () => {
  it("accepts exactly what validateToolParams accepts as a tool_name", () => {
    const base = { server_id: "s", agent_id: "a", bytes_read: 0, bytes_written: 0, delegation_depth: 0 }
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: "binary", maxLength: 8 }),
          fc.constantFrom(" x", "x\u0085", "\ufeffx", "", "a\ud800")
        ),
        (s) => {
          assert.strictEqual(Entry.isIdentity(s), Result.isSuccess(Entry.validateToolParams({ ...base, tool_name: s })))
        }
      )
    )
    assert.isFalse(Entry.isIdentity(3))
  })

  it("agrees with chio's rules written out, on mostly-ASCII strings of any length", () => {
    // The rules as stated: non-empty after trimming White_Space, equal to its trimmed
    // form, no Cc character, no lone surrogate.
    const rules = (s: string) => {
      const trimmed = s.replace(/^\p{White_Space}+/u, "").replace(/\p{White_Space}+$/u, "")
      return trimmed.length > 0 && trimmed === s && !/\p{Cc}/u.test(s) && !/\p{Cs}/u.test(s)
    }
    const ascii = fc.string({
      unit: fc.integer({ min: 0, max: 0x7f }).map((c) => String.fromCharCode(c)),
      maxLength: 300
    })
    const mixed = fc.tuple(
      ascii,
      fc.constantFrom(" ", "\t", "\u0085", "\u00a0", "\u3000", "é", "\ud800", "\u007f"),
      ascii
    )
      .map(([a, b, c]) => a + b + c)
    fc.assert(
      fc.property(fc.oneof(ascii, mixed), (s) => assert.strictEqual(Entry.isIdentity(s), rules(s), JSON.stringify(s)))
    )
  })
})
