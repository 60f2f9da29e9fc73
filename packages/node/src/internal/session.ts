/**
 * The line surgery `repair` needs on a session directory (how far set-aside bytes
 * reached, dropping a line the chain continues past). Loading is `load.ts`, the
 * writer `writer.ts`, the paged reader `reader.ts`.
 */
import type { CorruptJournal, StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as path from "node:path"
import type * as Base from "./fileOps/base.ts"
import * as Lines from "./fileOps/lines.ts"
import * as Open from "./fileOps/open.ts"
import * as Replace from "./fileOps/replace.ts"
import { readWhole } from "./load.ts"
import * as Segment from "./segment.ts"

/**
 * The highest entry sequence that any parseable record of `file` from byte `from`
 * on names, skipping what does not parse: how far the bytes that a repair sets
 * aside reached, for its report of what was lost. A line over the bound ends the
 * reading there.
 */
export const highestSequence = (
  ctx: Base.Context,
  file: string,
  from: number
): Effect.Effect<number | null, StorageError> =>
  Open.withHandle(Open.openRead(ctx, file), (fh) =>
    Effect.flatMap(Lines.boundedSize(ctx, fh, file), (size) => {
      const reader = new Lines.LineReader(ctx, fh, file, file, from, size)
      let highest: number | null = null
      const loop: Effect.Effect<number | null> = Effect.suspend(() => {
        for (;;) {
          const item = reader.poll()
          if (item === Lines.NeedIo) {
            return reader.io().pipe(
              Effect.matchEffect({ onFailure: () => Effect.succeed(highest), onSuccess: () => loop })
            )
          }
          if (item === null) return Effect.succeed(highest)
          const record = Segment.parseLine(item.line)
          if (record._tag === "Entry") highest = Math.max(highest ?? 0, record.entry.sequence)
        }
      })
      return loop
    }))

/**
 * For `repair`: when the line at `offset` of `file` is complete and is not an entry,
 * rewrites the segment without it (the line kept in `<segment>.damaged-<offset>`,
 * the segment replaced atomically) and asks `better` whether the records now verify
 * further; if not, puts the segment back as it was. Succeeds with the side file's
 * name, or null when nothing was changed.
 */
export const dropLineIfChainContinues = Effect.fnUntraced(function*(
  ctx: Base.Context,
  dir: string,
  file: string,
  offset: number,
  better: Effect.Effect<boolean, StorageError | CorruptJournal>
) {
  const name = path.basename(file)
  if (Segment.parseName(name) === null || file !== path.join(dir, name)) return null
  const bytes = yield* readWhole(ctx, file)
  const end = bytes.indexOf(10, offset)
  if (offset === 0 || end < 0 || end + 1 >= bytes.length) return null
  const line = bytes.subarray(offset, end + 1)
  if (Segment.parseLine(line.subarray(0, line.length - 1))._tag === "Entry") return null
  const names = new Set(yield* Replace.listDir(ctx, dir))
  const side = Replace.freeName(names, Replace.damagedName(name, offset))
  yield* Replace.atomicReplace(ctx, dir, side, line)
  const without = new Uint8Array(bytes.length - line.length)
  without.set(bytes.subarray(0, offset), 0)
  without.set(bytes.subarray(end + 1), offset)
  yield* Replace.atomicReplace(ctx, dir, name, without)
  if (yield* better) return side
  yield* Replace.atomicReplace(ctx, dir, name, bytes)
  yield* Replace.unlinkIfExists(ctx, path.join(dir, side))
  return null
})
