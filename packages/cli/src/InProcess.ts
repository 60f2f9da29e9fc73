/**
 * The command run inside the calling process: `run` takes the words after
 * `session-journal`, an environment and stdin, and resolves with the exit code
 * and what the command wrote to stdout and stderr, with no child process. It
 * dispatches as `main.ts` does (the command hook first, then the command tree);
 * what only a process has (signals, `process.exitCode`, the guard's forwarder,
 * `claude-code forward`) is the bin's.
 *
 * @since 0.1.0
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { Buffer } from "node:buffer"
import * as HookProcess from "./commands/HookProcess.ts"
import { runArgs } from "./index.ts"
import * as Input from "./Input.ts"
import { hookArgs } from "./internal/hookArgs.ts"
import * as Output from "./Output.ts"

/**
 * What a run reads: the environment (the `ConfigProvider`'s variables; none by
 * default) and stdin (empty by default).
 *
 * @since 0.1.0
 */
export interface Options {
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  readonly stdin?: string | Uint8Array | undefined
}

/**
 * What a run did: its exit code and everything it wrote, decoded as UTF-8
 * (`stdoutBytes` as written).
 *
 * @since 0.1.0
 */
export interface Outcome {
  readonly code: number
  readonly stdout: string
  readonly stdoutBytes: Uint8Array
  readonly stderr: string
}

/**
 * Runs the command with `args` in this process; never rejects (a failure is an
 * exit code and a sentence on stderr, as in the bin).
 *
 * @since 0.1.0
 */
export const run = async (args: ReadonlyArray<string>, options?: Options): Promise<Outcome> => {
  const out: Array<Uint8Array> = []
  const err: Array<string> = []
  const encoder = new TextEncoder()
  const input = options?.stdin
  const bytes = input === undefined ? new Uint8Array(0) : typeof input === "string" ? encoder.encode(input) : input
  const stdin = (): AsyncIterable<Uint8Array> => ({
    async *[Symbol.asyncIterator]() {
      if (bytes.length > 0) yield bytes.slice()
    }
  })
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(options?.env ?? {})) {
    if (value !== undefined) env[name] = value
  }
  const done = (code: number): Outcome => {
    const stdoutBytes = new Uint8Array(Buffer.concat(out))
    return { code, stdout: new TextDecoder().decode(stdoutBytes), stdoutBytes, stderr: err.join("") }
  }
  const hook = hookArgs(args)
  if (args[0] === "claude-code" && args[1] === "forward") {
    err.push("session-journal: claude-code forward runs only as a process (the bin).\n")
    return done(70)
  }
  if (hook !== null) {
    const outcome = await HookProcess.run(hook, {
      stdin: stdin(),
      stdout: (text) => Promise.resolve(void out.push(encoder.encode(text))),
      stderr: (text) => Promise.resolve(void err.push(text)),
      env
    })
    return done(outcome.exitCode)
  }
  const streams: Output.Streams = {
    stdout: (data, written) => {
      out.push(typeof data === "string" ? encoder.encode(data) : data.slice())
      written()
    },
    stderr: (text) => {
      err.push(text)
    },
    stdoutColumns: () => undefined,
    stderrColumns: () => undefined
  }
  const code = await Effect.runPromise(
    runArgs(args).pipe(
      Effect.provideService(Console.Console, Output.makeConsole(streams)),
      Effect.provideService(Input.Stdin, stdin),
      Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })),
      Effect.provide(NodeServices.layer)
    )
  )
  return done(code)
}
