/**
 * The body of a transparency-log checkpoint (C2SP `tlog-checkpoint`, docs/DESIGN.md §14):
 * three lines, the origin, the tree size in decimal and the base64 RFC 6962 root, then
 * optional extension lines. Signed as a `SignedNote`, it is a head of a session that
 * an outside verifier can hold. (The journal's own checkpoint document, `Checkpoint`, is
 * another thing: the state a load starts from.)
 *
 * A session's origin is `<journal>/<session id>`, `journal` being the signer key's name
 * by default, so that one key signs the heads of many sessions and a head of one session
 * can never pass for another's.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Base64 from "../internal/base64.ts"
import * as Merkle from "../Merkle.ts"

/**
 * A tree head: which log (`origin`), how many leaves, the root, and extension lines.
 *
 * @since 0.1.0
 */
export interface TreeHead {
  readonly origin: string
  readonly size: number
  readonly root: Uint8Array
  readonly extensions: ReadonlyArray<string>
}

/**
 * A text that is not a checkpoint body; `detail` says what is wrong.
 *
 * @since 0.1.0
 */
export class InvalidTreeHead extends Schema.TaggedError<InvalidTreeHead>()("InvalidTreeHead", {
  detail: Schema.String
}) {
  override get message(): string {
    return `not a checkpoint: ${this.detail}`
  }
}

/**
 * The origin of a session's checkpoints: `<journal>/<session id>`.
 *
 * @since 0.1.0
 */
export const origin = (journal: string, sessionId: string): string => `${journal}/${sessionId}`

/**
 * The tree head of a session's tree.
 *
 * @since 0.1.0
 */
export const make = (originLine: string, tree: Merkle.CompactRange): TreeHead => ({
  origin: originLine,
  size: tree.size,
  root: Merkle.root(tree),
  extensions: []
})

/**
 * The note text of a tree head, ending in a newline.
 *
 * @since 0.1.0
 */
export const text = (head: TreeHead): string =>
  [head.origin, String(head.size), Base64.encode(head.root), ...head.extensions].map((l) => `${l}\n`).join("")

/**
 * Reads a note text as a tree head: a non-empty origin, a decimal size without leading
 * zeros, a base64 root of 32 bytes, and non-empty extension lines.
 *
 * @since 0.1.0
 */
export const parse = (noteText: string): Result.Result<TreeHead, InvalidTreeHead> => {
  const bad = (detail: string) => Result.fail(new InvalidTreeHead({ detail }))
  if (!noteText.endsWith("\n")) return bad("the text does not end with a newline")
  const lines = noteText.slice(0, -1).split("\n")
  if (lines.length < 3) return bad("it has fewer than three lines")
  const [originLine, sizeLine, rootLine, ...extensions] = lines as [string, string, string, ...Array<string>]
  if (originLine.length === 0) return bad("the origin line is empty")
  if (!/^(?:0|[1-9][0-9]*)$/.test(sizeLine) || !Number.isSafeInteger(Number(sizeLine))) {
    return bad(`the tree size ${JSON.stringify(sizeLine)} is not a decimal number without leading zeros`)
  }
  const root = Base64.decode(rootLine)
  if (root === undefined || root.length !== Merkle.HASH_BYTES) return bad("the root hash is not the base64 of 32 bytes")
  if (extensions.some((l) => l.length === 0)) return bad("an extension line is empty")
  return Result.succeed({ origin: originLine, size: Number(sizeLine), root, extensions })
}

/**
 * The base64 of a hash, as checkpoints and proofs spell it.
 *
 * @since 0.1.0
 */
export const base64 = (bytes: Uint8Array): string => Base64.encode(bytes)

/**
 * The bytes of a canonical base64 text (`undefined` for anything else).
 *
 * @since 0.1.0
 */
export const fromBase64 = (text: string): Uint8Array | undefined => Base64.decode(text)
