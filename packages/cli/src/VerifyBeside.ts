/**
 * Verification of a session beside the main thread: on the filesystem, a long
 * session is verified in a worker thread (`VerifyWorker.ts`) while the caller
 * reads and renders the same history on its own thread.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Worker } from "node:worker_threads"
import * as Storage from "./Storage.ts"
import * as Verify from "./Verify.ts"

/**
 * Stored size from which `session` verifies in a worker thread (4 MiB,
 * roughly 10,000 entries).
 *
 * @since 0.3.0
 */
export const BESIDE_MIN_BYTES = 4 * 1024 * 1024

// The session directory's size, 0 when it cannot be read (the verification that
// follows then reports why).
const storedBytes = (id: string, storage: Storage.Options): number => {
  try {
    const dir = path.join(storage.dir, id)
    return fs.readdirSync(dir).reduce((n, name) => n + fs.lstatSync(path.join(dir, name)).size, 0)
  } catch {
    return 0
  }
}

/**
 * `Verify.session`, on the filesystem run in a worker thread (`VerifyWorker.ts`), so
 * that it takes a second core while the caller reads the same session. When the
 * worker cannot start or does not succeed, the session is verified here, which
 * also gives a failure its type.
 *
 * @since 0.3.0
 */
export const session = (id: string, storage: Storage.Options, minBytes: number = BESIDE_MIN_BYTES) => {
  // Starting a worker costs about 0.2 s: worth it only for a long session.
  if (!Storage.isFilesystem(storage) || storedBytes(id, storage) < minBytes) return Verify.session(id, storage)
  const inWorker = Effect.callback<Verify.Report | null>((resume) => {
    let done = false
    const finish = (report: Verify.Report | null) => {
      if (done) return
      done = true
      resume(Effect.succeed(report))
    }
    let worker: Worker
    try {
      worker = new Worker(new URL("./VerifyWorker.ts", import.meta.url), { workerData: { id, storage } })
    } catch {
      finish(null)
      return
    }
    worker.once("message", (m: { readonly ok: boolean; readonly report?: Verify.Report }) => finish(m.ok && m.report !== undefined ? m.report : null))
    worker.once("error", () => finish(null))
    worker.once("exit", () => finish(null))
    return Effect.promise(() => worker.terminate())
  })
  return Effect.flatMap(inWorker, (report) => (report === null ? Verify.session(id, storage) : Effect.succeed(report)))
}
