/**
 * `session-journal report ID [--out FILE]`: writes the session's report page to
 * a file (default `ID.html`) through a temporary file and a rename, so a reader
 * never sees half a report, and prints where it went with the verification
 * result. The report is written also when verification fails; the command then
 * exits 1, as `verify` does.
 *
 * @since 0.1.0
 */
import { StorageError } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { VerificationFailed } from "../Failure.ts"
import * as Output from "../Output.ts"
import type * as Storage from "../Storage.ts"
import * as Html from "./Html.ts"
import * as Report from "./Report.ts"
import * as ReportModel from "./ReportModel.ts"

/**
 * The link from one report to another session's report: a file next to it.
 *
 * @since 0.1.0
 */
export const fileLink = (id: string): string => `${encodeURIComponent(id)}.html`

/**
 * What `report` did, as printed with `--json`.
 *
 * @since 0.1.0
 */
export interface Written {
  readonly id: string
  readonly file: string
  readonly bytes: number
  readonly entries: number
  readonly ok: boolean | null
  readonly head: string
  readonly millis: number
}

// write(2) on a regular file may still write less than asked (a full disk
// reports itself on the next call): loop until everything is written.
const writeFully = (fd: number, data: Buffer, length: number) => {
  let done = 0
  while (done < length) done += fs.writeSync(fd, data, done, length - done)
}

const writeChunks = (file: string, chunks: Iterable<string>) =>
  Effect.try({
    try: () => {
      const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`)
      let bytes = 0
      const fd = fs.openSync(tmp, "w", 0o644)
      try {
        // Chunks are encoded straight into one 4 MiB buffer, written when full: no
        // joined strings and no buffer per chunk (a long report is 100,000s of rows).
        const buffer = Buffer.allocUnsafe(1 << 22)
        let used = 0
        const flush = () => {
          if (used === 0) return
          writeFully(fd, buffer, used)
          bytes += used
          used = 0
        }
        for (const chunk of chunks) {
          // At most 3 bytes of UTF-8 per UTF-16 unit.
          if (chunk.length * 3 > buffer.length - used) flush()
          if (chunk.length * 3 > buffer.length) {
            const data = Buffer.from(chunk, "utf8")
            writeFully(fd, data, data.length)
            bytes += data.length
          } else {
            used += buffer.write(chunk, used, "utf8")
          }
        }
        flush()
        fs.fsyncSync(fd)
      } catch (e) {
        fs.closeSync(fd)
        fs.rmSync(tmp, { force: true })
        throw e
      }
      fs.closeSync(fd)
      fs.renameSync(tmp, file)
      return bytes
    },
    catch: (cause) => StorageError.io("write report", cause, file)
  })

/**
 * Makes the report of session `id` and writes it to `out` (default `ID.html`).
 *
 * @since 0.1.0
 */
export const run = (id: string, out: string | undefined, storage: Storage.Options, json: boolean) =>
  Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    const model = yield* ReportModel.collect(id, storage)
    const file = path.resolve(out ?? `${id}.html`)
    const bytes = yield* writeChunks(file, Report.render(model, { link: fileLink }))
    const written: Written = {
      id,
      file,
      bytes,
      entries: model.summary.entries,
      ok: model.verify?.ok ?? null,
      head: model.head,
      millis: (yield* Clock.currentTimeMillis) - started
    }
    if (json) yield* Output.json(written)
    else {
      const status = model.verify === null ? "" : model.verify.ok ? ", verified ok" : ", VERIFICATION FAILED"
      yield* Output.write(
        `report of ${id} written to ${file} (${written.entries} entries, ${
          Html.bytes(bytes)
        }${status}; head ${written.head})\n`
      )
    }
    if (model.verify !== null && !model.verify.ok) return yield* new VerificationFailed({ failed: 1, total: 1 })
  })
