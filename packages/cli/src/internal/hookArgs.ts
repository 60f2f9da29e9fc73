/**
 * The arguments of `session-journal [global flags] claude-code hook [flags]`,
 * recognized without the command tree, so that the command hook starts without
 * loading it (`main.ts`). Anything this does not recognize (help, an unknown
 * flag, a missing value) is left to the command tree, which reports it.
 */

/** The flags of the command hook. */
export interface HookArgs {
  /** `--root DIR` or the global `--dir DIR`. */
  readonly root: string | undefined
  /** `--postgres URL` (global). */
  readonly postgres: string | undefined
  /** `--policy FILE`. */
  readonly policy: string | undefined
  /** `--fail-open`. */
  readonly failOpen: boolean
  /** `--max-input-bytes N`. */
  readonly maxInputBytes: number | undefined
  /** `--wait DURATION`, in milliseconds. */
  readonly waitMillis: number | undefined
  /** `--deadline DURATION`, in milliseconds: the hook answers within it whatever happens. */
  readonly deadlineMillis: number | undefined
  /** `--no-self-protection`: calls may touch the journal, the policy and the hooks' settings. */
  readonly noSelfProtection?: boolean | undefined
}

// `--wait` takes a number and a unit: 500ms, 30s, 2m, 1h; a bare number is seconds.
const WAIT_PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/

/**
 * The milliseconds of a `--wait` value (`500ms`, `30s`, `2m`, `1h`; a bare number
 * is seconds; at most a day); throws an `Error` saying what is wrong. The one
 * parser of every command's `--wait` (`commandKit.parseWait`).
 */
export const parseWaitMillis = (text: string): number => {
  const m = WAIT_PATTERN.exec(text.trim())
  if (m === null) throw new Error(`not a duration: ${JSON.stringify(text)} (use for example 500ms, 30s, 2m or 1h)`)
  const n = Number(m[1])
  const unit = m[2] ?? "s"
  const millis = unit === "ms" ? n : unit === "s" ? n * 1000 : unit === "m" ? n * 60_000 : n * 3_600_000
  if (!Number.isFinite(millis) || millis > 24 * 3_600_000) throw new Error(`${JSON.stringify(text)} is more than a day`)
  return millis
}

const waitOrUndefined = (text: string): number | undefined => {
  try {
    return parseWaitMillis(text)
  } catch {
    return undefined
  }
}

/** An invocation's words and flags, as `readFlags` reads them. */
export interface Flags {
  /** The flags that take a value, by name (`--name`), each given once. */
  readonly values: ReadonlyMap<string, string>
  /** The flags without a value that were given, each once. */
  readonly switches: ReadonlySet<string>
  /** The words that are no flag, in order. */
  readonly words: ReadonlyArray<string>
}

/**
 * Reads `argv` as words and flags: each of `valued` takes a value (`--name VALUE`
 * or `--name=VALUE`), each of `switches` none, `skipped` are read and dropped.
 * Null for anything else: an unknown flag, a valued flag given twice, a missing
 * value, a switch given twice when `switchOnce` is true, a value starting with `-`
 * when `dashValues` is false.
 */
export const readFlags = (
  argv: ReadonlyArray<string>,
  valued: ReadonlySet<string>,
  switches: ReadonlySet<string>,
  options?: {
    readonly skipped?: ReadonlySet<string>
    readonly switchOnce?: boolean
    readonly dashValues?: boolean
  }
): Flags | null => {
  const values = new Map<string, string>()
  const given = new Set<string>()
  const words: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i]!
    let value: string | undefined
    const eq = arg.indexOf("=")
    if (arg.startsWith("--") && eq > 0) {
      value = arg.slice(eq + 1)
      arg = arg.slice(0, eq)
    }
    if (valued.has(arg)) {
      if (value === undefined) {
        if (i + 1 >= argv.length) return null
        value = argv[++i]!
      }
      if (values.has(arg) || (options?.dashValues === false && value.startsWith("-"))) return null
      values.set(arg, value)
    } else if (switches.has(arg) && value === undefined) {
      if (options?.switchOnce === true && given.has(arg)) return null
      given.add(arg)
    } else if (options?.skipped?.has(arg) === true && value === undefined) continue
    else if (arg.startsWith("-")) return null
    else words.push(arg)
  }
  return { values, switches: given, words }
}

const VALUED = new Set(["--dir", "--postgres", "--root", "--policy", "--max-input-bytes", "--wait", "--deadline"])
const SWITCHES = new Set(["--fail-open", "--no-self-protection"])
const SKIPPED = new Set(["--json", "--verbose"])

/**
 * The hook's flags when `argv` (without node and the script) is exactly a hook
 * invocation of `door` (`claude-code hook`, or `codex hook`), else null.
 */
export const hookArgs = (
  argv: ReadonlyArray<string>,
  door: "claude-code" | "codex" = "claude-code"
): HookArgs | null => {
  const flags = readFlags(argv, VALUED, SWITCHES, { skipped: SKIPPED })
  if (flags === null) return null
  const { values, words } = flags
  const failOpen = flags.switches.has("--fail-open")
  const noSelfProtection = flags.switches.has("--no-self-protection")
  if (words.length !== 2 || words[0] !== door || words[1] !== "hook") return null
  const bytes = values.get("--max-input-bytes")
  const maxInputBytes = bytes === undefined ? undefined : /^\d{1,15}$/.test(bytes) ? Number(bytes) : NaN
  if (Number.isNaN(maxInputBytes) || maxInputBytes === 0) return null
  const wait = values.get("--wait")
  const waitMillis = wait === undefined ? undefined : waitOrUndefined(wait)
  if (wait !== undefined && waitMillis === undefined) return null
  const deadline = values.get("--deadline")
  const deadlineMillis = deadline === undefined ? undefined : waitOrUndefined(deadline)
  if (deadline !== undefined && (deadlineMillis === undefined || deadlineMillis <= 0)) return null
  if (values.has("--root") && values.has("--dir")) return null
  return {
    root: values.get("--root") ?? values.get("--dir"),
    postgres: values.get("--postgres"),
    policy: values.get("--policy"),
    failOpen,
    maxInputBytes,
    waitMillis,
    deadlineMillis,
    ...(noSelfProtection ? { noSelfProtection } : {})
  }
}
