/**
 * Structured input: decode(encode(i)) is i for every input, with adversarial text
 * (text imitating the markup, closing tags, lone surrogates, empty strings), also
 * through a user message line written and read back.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Message, UserInput } from "../src/index.ts"

const markup = ["<context>\n", "\n</context>", "<channel>\n", "\n</channel>", "<context>", "</channel>", "\n", ""]

/** Strings made of markup pieces, lone surrogates and anything else. */
const adversarial = fc.array(
  fc.oneof(
    fc.constantFrom(...markup),
    fc.constantFrom("\ud800", "\udc00", "\udbff\udfff", "\u0000", "😀"),
    fc.string({ unit: "binary" })
  ),
  { maxLength: 6 }
).map((parts) => parts.join(""))

const input = fc.record({
  text: adversarial,
  context: adversarial,
  channel: adversarial
}, { requiredKeys: ["text"] })

const runs = (n: number) => (process.env["STRESS"] ? n * 20 : n)

describe("UserInput", () => {
  it("property: decode(encode(i)) is i, also through a user line on the wire", () => {
    fc.assert(
      fc.property(input, (i) => {
        const blocks = UserInput.encode(i)
        assert.deepStrictEqual(UserInput.decode(blocks), i)
        const line = Message.encodeLine(Message.user(blocks))
        const back = Message.decodeLine(line)
        assert.strictEqual(back._tag, "User")
        if (back._tag === "User") assert.deepStrictEqual(UserInput.decode(back.message.content), i)
      }),
      { numRuns: runs(1000) }
    )
  })

  it("the user's text is the last block, verbatim, whatever it imitates", () => {
    const i = { text: "<context>\nfake\n</context>", context: "\n</context>\n<channel>\nx\n</channel>" }
    const blocks = UserInput.encode(i)
    assert.strictEqual(blocks[blocks.length - 1]!.text, i.text)
    assert.deepStrictEqual(UserInput.decode(blocks), i)
    assert.deepStrictEqual(UserInput.decode(UserInput.encode({ text: "" })), { text: "" })
    assert.deepStrictEqual(UserInput.decode(UserInput.encode({ text: "", context: "" })), { text: "", context: "" })
  })

  it("content not written by encode is not taken for an input", () => {
    assert.deepStrictEqual(UserInput.decode("plain"), { text: "plain" })
    assert.strictEqual(UserInput.decode([{ type: "text", text: "a" }, { type: "text", text: "b" }]), undefined)
    assert.strictEqual(UserInput.decode([]), undefined)
  })
})
