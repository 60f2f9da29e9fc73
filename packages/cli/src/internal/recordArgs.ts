/**
 * The arguments of `session-journal [global flags] record ID --tool T --server S
 * --agent A [--read N] [--written N] [--depth N] [--denied] [--wait DURATION]`,
 * recognized without the command tree, so that `record` (started once per tool
 * call by an agent's hook) runs without loading it (`main.ts`). Only the plain
 * forms are recognized: each flag at most once, counts as decimal digits without a
 * leading zero, no value that starts with `-`; anything else (help, an unknown
 * flag, a missing or odd value) is left to the command tree, which parses it the
 * same way or reports it.
 */
import { parseWaitMillis, readFlags } from "./hookArgs.ts"
import type { Call } from "./recordCall.ts"

/** A `record` invocation's flags and argument. */
export interface RecordArgs extends Call {
  /** `--wait DURATION`, in milliseconds. */
  readonly waitMillis: number | undefined
  /** The global `--dir DIR`. */
  readonly dir: string | undefined
  /** The global `--postgres URL`. */
  readonly postgres: string | undefined
  readonly json: boolean
  readonly verbose: boolean
}

const VALUED = new Set([
  "--tool",
  "--server",
  "--agent",
  "--read",
  "--written",
  "--depth",
  "--wait",
  "--dir",
  "--postgres"
])
const SWITCHES = new Set(["--denied", "--json", "--verbose"])
const COUNT = /^(?:0|[1-9][0-9]{0,14})$/

/** The invocation's arguments when `argv` (without node and the script) is exactly a plain `record`, else null. */
export const recordArgs = (argv: ReadonlyArray<string>): RecordArgs | null => {
  const flags = readFlags(argv, VALUED, SWITCHES, { switchOnce: true, dashValues: false })
  if (flags === null || flags.words.includes("")) return null
  const { switches, values, words } = flags
  if (words.length !== 2 || words[0] !== "record") return null
  const tool = values.get("--tool")
  const server = values.get("--server")
  const agent = values.get("--agent")
  if (tool === undefined || server === undefined || agent === undefined) return null
  const count = (flag: string): number | null => {
    const text = values.get(flag)
    return text === undefined ? 0 : COUNT.test(text) ? Number(text) : null
  }
  const read = count("--read")
  const written = count("--written")
  const depth = count("--depth")
  if (read === null || written === null || depth === null) return null
  const wait = values.get("--wait")
  let waitMillis: number | undefined
  if (wait !== undefined) {
    try {
      waitMillis = parseWaitMillis(wait)
    } catch {
      return null
    }
  }
  return {
    id: words[1]!,
    tool,
    server,
    agent,
    read,
    written,
    depth,
    denied: switches.has("--denied"),
    waitMillis,
    dir: values.get("--dir"),
    postgres: values.get("--postgres"),
    json: switches.has("--json"),
    verbose: switches.has("--verbose")
  }
}
