/**
 * Reading a policy file (`Policy` of core): bounded, strict UTF-8, decoded with
 * every wrong JSON path named. Kept apart from the `policy` commands so that the
 * command hook loads it without the command tree.
 *
 * @since 0.1.0
 */
import { Policy } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import { InvalidInput } from "./Failure.ts"
import * as Input from "./Input.ts"

/**
 * Largest policy file read (1 MiB): far beyond any policy written by hand.
 *
 * @since 0.1.0
 */
export const MAX_POLICY_BYTES = 1024 * 1024

// Opened without blocking (a FIFO or a device would hold the open, and with it a
// thread Node waits for when the process exits) and read only when it is a
// regular file.
const readRegular = async (file: string) => {
  const handle = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  try {
    if (!(await handle.stat()).isFile()) {
      return Result.fail(new InvalidInput({ field: file, reason: "cannot read it: not a regular file" }))
    }
    return await Input.readBounded(handle.createReadStream({ autoClose: false }), file, MAX_POLICY_BYTES)
  } finally {
    await handle.close()
  }
}

/**
 * Reads a policy file's text: a regular file (a FIFO or a device is refused
 * without blocking on it), strict UTF-8, at most `MAX_POLICY_BYTES`.
 *
 * @since 0.1.0
 */
export const readText = (file: string): Effect.Effect<string, InvalidInput> =>
  Effect.tryPromise({
    try: () => readRegular(file),
    catch: (e) => new InvalidInput({ field: file, reason: `cannot read it: ${messageOf(e)}` })
  }).pipe(Effect.flatMap(Effect.fromResult))

/**
 * What `Policy.check` says of a policy file: refused (`InvalidInput` on the file,
 * naming every JSON path that is wrong and what was expected there, a key an
 * object repeats among them), or the policy with the warnings an author should
 * read (tool names no agent uses in that spelling), each with its JSON path.
 *
 * @since 0.1.0
 */
export const check = (
  file: string
): Effect.Effect<{ readonly policy: Policy.Policy; readonly warnings: ReadonlyArray<string> }, InvalidInput> =>
  Effect.flatMap(readText(file), (text) => {
    const report = Policy.check(text)
    if (report.policy === null || report.issues.length > 0) {
      const reason = report.issues.length === 0
        ? "it does not decode"
        : report.issues.map((i) => `${i.path}: ${i.message}`).join("; ")
      return Effect.fail(new InvalidInput({ field: `policy ${file}`, reason }))
    }
    return Effect.succeed({ policy: report.policy, warnings: report.warnings.map((w) => `${w.path}: ${w.message}`) })
  })

/**
 * Reads and decodes a policy file (`readText`, then `check`): a file that cannot
 * be read, does not decode or repeats a key in an object is `InvalidInput` on the
 * file, naming every JSON path that is wrong and what was expected there.
 * Warnings do not refuse it.
 *
 * @since 0.1.0
 */
export const load = (file: string): Effect.Effect<Policy.Policy, InvalidInput> =>
  Effect.map(check(file), (checked) => checked.policy)
