/**
 * Structured user input: the user's verbatim `text`, and optionally `context` (what
 * the host adds: a file, a selection, a note) and `channel` (where the message came
 * from), encoded as the content blocks of one user message.
 *
 * The layout is positional: the user's text is always the **last** block, verbatim;
 * before it come the blocks of the fields present, in a fixed order, each a fixed
 * header line, the field's value verbatim, and a fixed footer. Decoding takes the
 * last block's text as the user's text without looking at it, and reads each
 * field by cutting its header and footer off by their lengths, so no text (the
 * user's, or a context that imitates the markup, closing tags included) can move a
 * byte from one field to another: `decode(encode(i))` is `i` for every input
 * (property-tested with adversarial text).
 *
 * @since 0.1.0
 */
import type * as Message from "./Message.ts"

/**
 * One user message: the user's text, and what the host adds.
 *
 * @since 0.1.0
 */
export interface UserInput {
  readonly text: string
  readonly context?: string | undefined
  readonly channel?: string | undefined
}

/** Header and footer of each field's block, in the order the blocks come. */
const fields = [
  ["channel", "<channel>\n", "\n</channel>"],
  ["context", "<context>\n", "\n</context>"]
] as const

/**
 * The content blocks of an input: the fields present (channel, then context), then
 * the text.
 *
 * @since 0.1.0
 */
export const encode = (input: UserInput): Array<{ readonly type: "text"; readonly text: string }> => {
  const blocks: Array<{ readonly type: "text"; readonly text: string }> = []
  for (const [key, header, footer] of fields) {
    const value = input[key]
    if (value !== undefined) blocks.push({ type: "text", text: header + value + footer })
  }
  blocks.push({ type: "text", text: input.text })
  return blocks
}

const textOf = (block: Message.ContentBlock | undefined): string | undefined =>
  block !== undefined && block.type === "text" && typeof block["text"] === "string" ? block["text"] : undefined

const field = (text: string, header: string, footer: string): string | undefined =>
  text.length >= header.length + footer.length && text.startsWith(header) && text.endsWith(footer)
    ? text.slice(header.length, text.length - footer.length)
    : undefined

/**
 * The input a user message's content holds, or undefined when it was not written
 * by `encode` (a plain string content is a text-only input).
 *
 * @since 0.1.0
 */
export const decode = (content: string | ReadonlyArray<Message.ContentBlock>): UserInput | undefined => {
  if (typeof content === "string") return { text: content }
  const text = textOf(content[content.length - 1])
  if (text === undefined || content.length > fields.length + 1) return undefined
  const input: { text: string; context?: string; channel?: string } = { text }
  let next = 0
  for (let i = 0; i < content.length - 1; i++) {
    const block = textOf(content[i])
    if (block === undefined) return undefined
    // Fields come in a fixed order: find this block's among those still allowed.
    let matched = false
    while (next < fields.length && !matched) {
      const [key, header, footer] = fields[next++]!
      const value = field(block, header, footer)
      if (value !== undefined) {
        input[key] = value
        matched = true
      }
    }
    if (!matched) return undefined
  }
  return input
}
