/**
 * The measuring core of the benchmark harness: figures, goals, interleaved rounds
 * and the table. Every scenario measures its subject and its baseline in the same
 * process and run, alternating rounds (and alternating which of the two goes first),
 * so a burst of load from elsewhere on the machine hits both sides alike; ratios are
 * the median of the per-round paired ratios.
 */

/** A goal on a figure's ratio (or, for `memory.rss`, on a derived quantity). */
export interface Goal {
  readonly op: ">=" | "<="
  readonly target: number
  /** What the target applies to when it is not `ratio` (e.g. "growth MiB"). */
  readonly on?: string
}

/** One measured figure, as printed in the table and in `--json`. */
export interface Figure {
  readonly name: string
  readonly value: number | null
  readonly unit: string
  readonly baseline: string
  readonly baseline_value: number | null
  readonly ratio: number | null
  readonly goal: Goal | null
  /** For goals on something other than the ratio: the quantity the goal is checked on. */
  readonly goal_value?: number | null
  readonly met: boolean | null
  /** Set when the figure could not be measured: why. */
  readonly not_run?: string
  /** Extra context printed under the table (sizes, rounds, caveats). */
  readonly note?: string
}

/** Options every scenario receives. */
export interface RunOptions {
  readonly quick: boolean
  readonly log: (line: string) => void
}

/** A scenario: a name (or prefix of the figures it yields) and what it runs. */
export interface Scenario {
  readonly name: string
  /** Names of the figures this scenario yields (so `--only` can match any of them). */
  readonly figures: ReadonlyArray<string>
  readonly run: (options: RunOptions) => Promise<ReadonlyArray<Figure>>
}

/** Median of a non-empty list. */
export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** Whether `value` meets `goal`. */
export const meets = (goal: Goal | null, value: number | null): boolean | null =>
  goal === null || value === null ? null : goal.op === ">=" ? value >= goal.target : value <= goal.target

/** A high-resolution clock in milliseconds. */
export const now = (): number => performance.now()

/**
 * Result of one side of one round: how many operations took how long.
 */
export interface Sample {
  readonly ops: number
  readonly ms: number
}

/**
 * Runs `rounds` rounds of subject and baseline, alternating which goes first, and
 * returns both sample lists. One unrecorded warm-up round of each side runs first
 * (JIT, page cache, file creation).
 */
export const interleave = async (
  rounds: number,
  subject: (round: number) => Promise<Sample>,
  baseline: (round: number) => Promise<Sample>,
  options?: { readonly warmup?: boolean; readonly log?: (line: string) => void; readonly label?: string }
): Promise<{ readonly subject: Array<Sample>; readonly baseline: Array<Sample> }> => {
  if (options?.warmup !== false) {
    await baseline(-1)
    await subject(-1)
  }
  const s: Array<Sample> = []
  const b: Array<Sample> = []
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      b.push(await baseline(r))
      s.push(await subject(r))
    } else {
      s.push(await subject(r))
      b.push(await baseline(r))
    }
    options?.log?.(
      `  ${options.label ?? ""} round ${r + 1}/${rounds}: subject ${fmt(rate(s[r]!))}/s, baseline ${fmt(rate(b[r]!))}/s`
    )
  }
  return { subject: s, baseline: b }
}

/**
 * Like `interleave`, for several sides measured in the same rounds: each round runs
 * every side once, starting one side later than the previous round (a rotation), so
 * no side always runs first or last. Returns the samples of each side by name.
 */
export const interleaveMany = async (
  rounds: number,
  sides: ReadonlyArray<{ readonly name: string; readonly run: (round: number) => Promise<Sample> }>,
  options?: { readonly warmup?: boolean; readonly log?: (line: string) => void; readonly label?: string }
): Promise<Record<string, Array<Sample>>> => {
  const out: Record<string, Array<Sample>> = {}
  for (const side of sides) out[side.name] = []
  if (options?.warmup !== false) { for (const side of sides) await side.run(-1) }
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < sides.length; k++) {
      const side = sides[(r + k) % sides.length]!
      out[side.name]!.push(await side.run(r))
    }
    options?.log?.(
      `  ${options.label ?? ""} round ${r + 1}/${rounds}: ` +
        sides.map((side) => `${side.name} ${fmt(rate(out[side.name]![r]!))}/s`).join(", ")
    )
  }
  return out
}

/** Operations per second of a sample. */
export const rate = (s: Sample): number => s.ops / (s.ms / 1000)

/**
 * A throughput figure from interleaved samples: value and baseline are median
 * rates, the ratio is the median of per-round subject/baseline rate ratios.
 */
export const throughputFigure = (
  name: string,
  unit: string,
  baselineName: string,
  samples: { readonly subject: ReadonlyArray<Sample>; readonly baseline: ReadonlyArray<Sample> },
  goal: Goal | null,
  note?: string
): Figure => {
  const ratios = samples.subject.map((s, i) => rate(s) / rate(samples.baseline[i]!))
  const ratio = median(ratios)
  return {
    name,
    value: median(samples.subject.map(rate)),
    unit,
    baseline: baselineName,
    baseline_value: median(samples.baseline.map(rate)),
    ratio,
    goal,
    met: meets(goal, ratio),
    ...(note === undefined ? {} : { note })
  }
}

/**
 * A duration figure (lower is better) from interleaved samples: medians of
 * milliseconds, ratio the median of per-round subject/baseline time ratios.
 */
export const durationFigure = (
  name: string,
  baselineName: string,
  samples: { readonly subject: ReadonlyArray<Sample>; readonly baseline: ReadonlyArray<Sample> },
  goal: Goal | null,
  note?: string
): Figure => {
  const ratios = samples.subject.map((s, i) => s.ms / samples.baseline[i]!.ms)
  const ratio = median(ratios)
  return {
    name,
    value: median(samples.subject.map((s) => s.ms)),
    unit: "ms",
    baseline: baselineName,
    baseline_value: median(samples.baseline.map((s) => s.ms)),
    ratio,
    goal,
    met: meets(goal, ratio),
    ...(note === undefined ? {} : { note })
  }
}

/** A figure that could not be measured, with the reason. */
export const notRun = (name: string, unit: string, baseline: string, goal: Goal | null, why: string): Figure => ({
  name,
  value: null,
  unit,
  baseline,
  baseline_value: null,
  ratio: null,
  goal,
  met: null,
  not_run: why
})

/** Formats a number for the table: 3 significant digits, thousands separated. */
export const fmt = (n: number | null | undefined): string => {
  if (n === null || n === undefined || !Number.isFinite(n)) return "—"
  const abs = Math.abs(n)
  if (abs >= 1000) return Math.round(n).toLocaleString("en-US")
  if (abs >= 100) return n.toFixed(0)
  if (abs >= 10) return n.toFixed(1)
  if (abs >= 1) return n.toFixed(2)
  if (abs === 0) return "0"
  return n.toPrecision(2)
}

const goalText = (goal: Goal | null): string =>
  goal === null ? "(reported)" : `${goal.on ?? "ratio"} ${goal.op === ">=" ? "≥" : "≤"} ${goal.target}`

const verdict = (f: Figure): string =>
  f.not_run !== undefined ? "not run" : f.met === null ? "—" : f.met ? "met" : "NOT met"

/** Renders figures as a Markdown table (readable as plain text too). */
export const table = (figures: ReadonlyArray<Figure>): string => {
  const header = ["name", "value", "unit", "baseline", "baseline value", "ratio", "goal", "result"]
  const rows = figures.map((f) => [
    f.name,
    fmt(f.value),
    f.unit,
    f.baseline,
    fmt(f.baseline_value),
    f.goal_value !== undefined && f.goal_value !== null
      ? `${fmt(f.ratio)} (${f.goal?.on ?? ""} ${fmt(f.goal_value)})`
      : fmt(f.ratio),
    goalText(f.goal),
    verdict(f)
  ])
  const lines = [
    `| ${header.join(" | ")} |`,
    `|${header.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.join(" | ")} |`)
  ]
  const notes = figures.flatMap((f) =>
    f.not_run !== undefined
      ? [`- ${f.name}: not run: ${f.not_run}`]
      : f.note !== undefined
      ? [`- ${f.name}: ${f.note}`]
      : []
  )
  return [...lines, ...(notes.length > 0 ? ["", ...notes] : [])].join("\n")
}

/** The JSON line of a figure (`--json`). */
export const jsonLine = (f: Figure): string =>
  JSON.stringify({
    name: f.name,
    value: f.value,
    unit: f.unit,
    baseline: f.baseline,
    baseline_value: f.baseline_value,
    ratio: f.ratio,
    goal: f.goal === null ? null : goalText(f.goal),
    met: f.met,
    ...(f.goal_value !== undefined ? { goal_value: f.goal_value } : {}),
    ...(f.not_run !== undefined ? { not_run: f.not_run } : {})
  })
