import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import fc from "fast-check"
import { Entry } from "../src/index.ts"
import * as Arb from "./arbitraries.ts"

// `Entry.decode` checks common shapes by hand before falling back to the schema; it
// must agree with the schema alone on every input, valid or not.
const agree = (input: unknown) => {
  const fast = Entry.decode(input)
  const reference = Entry.decodeSchema(input)
  assert.strictEqual(Result.isSuccess(fast), Result.isSuccess(reference), JSON.stringify(input))
  if (Result.isSuccess(fast) && Result.isSuccess(reference)) {
    assert.deepStrictEqual(Entry.encode(fast.success), Entry.encode(reference.success))
    assert.deepStrictEqual(Entry.encode(fast.success), Entry.encodeChecked(reference.success))
  }
}

const mutations: ReadonlyArray<(o: Record<string, unknown>) => void> = [
  (o) => {
    delete o.kind
  },
  (o) => {
    o.kind = "tool"
  },
  (o) => {
    o.kind = ""
  },
  (o) => {
    o.extra = 1
  },
  (o) => {
    o.sequence = -1
  },
  (o) => {
    o.sequence = 1.5
  },
  (o) => {
    o.sequence = Number.MAX_SAFE_INTEGER + 1
  },
  (o) => {
    o.timestamp_secs = "1"
  },
  (o) => {
    o.prev_hash = "A".repeat(64)
  },
  (o) => {
    o.entry_hash = "0".repeat(63)
  },
  (o) => {
    o.tool_name = "a\ud800"
  },
  (o) => {
    o.tool_name = 3
  },
  (o) => {
    o.delegation_depth = 4294967296
  },
  (o) => {
    o.delegation_depth = -0
  },
  (o) => {
    o.allowed = 1
  },
  (o) => {
    o.payload = undefined
  },
  (o) => {
    o.payload = { x: Number.NaN }
  },
  (o) => {
    o.payload = { ["\udc00"]: 1 }
  },
  (o) => {
    delete o.payload
  },
  (o) => {
    delete o.bytes_read
  },
  (o) => {
    o.kind = "message"
  }
]

describe("Entry.decode fast path", () => {
  it("agrees with the schema on valid entries and on every single mutation of them", () => {
    fc.assert(
      fc.property(Arb.ops(6), fc.nat(mutations.length), (ops, m) => {
        const { entries } = Arb.run({}, ops, "decode")
        for (const e of entries) {
          const json = Entry.encode(e) as Record<string, unknown>
          agree(json)
          const mutated: Record<string, unknown> = { ...json }
          mutations[m % mutations.length]!(mutated)
          agree(mutated)
        }
      }),
      { numRuns: Arb.runs(200) }
    )
  })

  it("agrees with the schema on hashes with any one character replaced, and of any length", () => {
    const hex = "0123456789abcdef"
    fc.assert(
      fc.property(
        fc.constantFrom("prev_hash", "entry_hash"),
        fc.nat(63),
        fc.oneof(
          fc.string({ minLength: 1, maxLength: 1, unit: "binary" }),
          fc.constantFrom("A", "F", "g", "G", "/", ":", "`", "\u0660", "\uff10")
        ),
        fc.integer({ min: 0, max: 70 }),
        (field, at, c, length) => {
          const { entries } = Arb.run({}, [Arb.record("read_file")], "hash")
          const json = Entry.encode(entries[0]!) as Record<string, unknown>
          const h = json[field] as string
          agree({ ...json, [field]: h.slice(0, at) + c + h.slice(at + 1) })
          agree({ ...json, [field]: Array.from({ length }, (_, i) => hex[(i * 7 + at) % 16]).join("") })
        }
      ),
      { numRuns: Arb.runs(300) }
    )
  })

  it("refuses non-objects like the schema does", () => {
    for (const input of [null, 1, "x", [], [1], true, undefined]) agree(input)
  })
})
