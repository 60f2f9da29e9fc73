/**
 * Random JSON documents with their text as a person might write it (odd number
 * spellings, escaped strings, comments, trailing commas, tabs and CRLF) and the
 * value a JSON reader gets from it: the generators of the text editors'
 * property tests.
 */
import * as fc from "fast-check"

export interface Doc {
  readonly text: string
  readonly value: unknown
}

export const seed = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)

export const trivia = fc.constantFrom(
  "",
  "",
  " ",
  "\n",
  "\n  ",
  "\n\t\t",
  "\r\n    ",
  " // a comment, with \"quotes\" and { braces [\n",
  "/* block */",
  "\n  /* two\n     lines */ "
)

const numbers: ReadonlyArray<string> = [
  "12345678901234567890",
  "1.50",
  "-0",
  "1E+2",
  "0.1e-5",
  "0",
  "-3.14159265358979323846264338327950288"
]
export const number = fc.oneof(
  fc.constantFrom(...numbers),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String)
)
  .map((text): Doc => ({ text, value: Number(text) }))
export const string = fc.oneof(
  fc.string({ maxLength: 8 }).map((s): Doc => ({ text: JSON.stringify(s), value: s })),
  fc.constantFrom<Doc>({ text: "\"\\u0041\\/\\n\"", value: "A/\n" }, { text: "\"\\ud83d\\ude00\"", value: "😀" })
)
export const leaf = fc.oneof(
  number,
  string,
  fc.constantFrom<Doc>({ text: "true", value: true }, { text: "false", value: false }, { text: "null", value: null })
)

// `[a, b]` / `{"k": v}` with trivia around every token and maybe a trailing comma.
export const layout = (
  open: string,
  close: string,
  parts: ReadonlyArray<string>,
  ws: ReadonlyArray<string>,
  trailing: boolean
): string => {
  const t = (i: number) => ws[i % ws.length]!
  let out = open + t(0)
  parts.forEach((p, i) => {
    out += (i === 0 ? "" : `,${t(2 * i + 1)}`) + p + t(2 * i + 2)
  })
  return out + (trailing && parts.length > 0 ? "," + t(7) : "") + close
}

export const key = fc.oneof(fc.constantFrom("model", "env", "permissions", "a b", "é"), fc.string({ maxLength: 5 }))
  .filter((k) => k !== "hooks" && k !== "__proto__")
export const keyText = (k: string) => fc.constantFrom(JSON.stringify(k), JSON.stringify(k))

export const array = (item: fc.Arbitrary<Doc>, maxLength = 3): fc.Arbitrary<Doc> =>
  fc.tuple(fc.array(item, { maxLength }), fc.array(trivia, { minLength: 8, maxLength: 8 }), fc.boolean()).map((
    [items, ws, trailing]
  ) => ({ text: layout("[", "]", items.map((i) => i.text), ws, trailing), value: items.map((i) => i.value) }))

export const object = (members: fc.Arbitrary<ReadonlyArray<readonly [string, Doc]>>): fc.Arbitrary<Doc> =>
  fc.tuple(
    members,
    fc.array(trivia, { minLength: 8, maxLength: 8 }),
    fc.boolean(),
    fc.array(trivia, { minLength: 4, maxLength: 4 })
  )
    .chain(([ms, ws, trailing, around]) =>
      fc.tuple(...ms.map(([k]) => keyText(k))).map((keys) => ({
        text: layout(
          "{",
          "}",
          ms.map(([, d], i) => `${keys[i]}${around[i % 4]}:${around[(i + 1) % 4]}${d.text}`),
          ws,
          trailing
        ),
        value: Object.fromEntries(ms.map(([k, d]) => [k, d.value]))
      }))
    )

export const { value: anyValue } = fc.letrec<{ value: Doc; arr: Doc; obj: Doc }>((tie) => ({
  value: fc.oneof({ depthSize: "small", withCrossShrink: true }, leaf, tie("arr"), tie("obj")),
  arr: array(tie("value")),
  obj: object(fc.uniqueArray(fc.tuple(key, tie("value")), { maxLength: 3, selector: ([k]) => k }))
}))
