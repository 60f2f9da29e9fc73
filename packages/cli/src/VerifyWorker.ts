/**
 * A worker thread that verifies one session on the filesystem and posts its
 * `Verify.Report` back (or `{ ok: false }` when it could not, and the caller
 * verifies in its own thread to get the typed failure). `VerifyBeside.session` uses it so
 * that verification (hashing the whole history) runs on a second core while
 * the main thread reads and renders the same history.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import { parentPort, workerData } from "node:worker_threads"
import * as Storage from "./Storage.ts"
import * as Verify from "./Verify.ts"

/**
 * What the worker is started with.
 *
 * @since 0.3.0
 */
export interface Input {
  readonly id: string
  readonly storage: Storage.Options
}

/**
 * What the worker posts back.
 *
 * @since 0.3.0
 */
export type Output = { readonly ok: true; readonly report: Verify.Report } | { readonly ok: false }

const port = parentPort
if (port !== null) {
  const input = workerData as Input
  void Effect.runPromiseExit(Verify.session(input.id, input.storage).pipe(Effect.provide(Storage.layer(input.storage)))).then(
    (exit) => port.postMessage((exit._tag === "Success" ? { ok: true, report: exit.value } : { ok: false }) satisfies Output)
  )
}
