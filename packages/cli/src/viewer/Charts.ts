/**
 * Charts drawn as inline SVG text: horizontal bars (calls per tool, denials per
 * reason) and cumulative lines (bytes read and written over a session). Pure
 * functions of their data; every label is escaped. Each bar carries its label
 * and value as `data-` attributes so the page can be checked against `stats`.
 *
 * @since 0.1.0
 */
import * as Html from "./Html.ts"

/**
 * The most bars a chart draws; the rest are summed into one "other" bar.
 *
 * @since 0.1.0
 */
export const MAX_BARS = 24

/**
 * The most points a line chart draws; longer series are sampled evenly (the last
 * point is always kept).
 *
 * @since 0.1.0
 */
export const MAX_POINTS = 400

const clip = (s: string, max: number): string => (s.length <= max ? s : `${s.slice(0, max - 1)}…`)

/**
 * A horizontal bar chart of counts, largest first (ties by name). Rows past
 * `MAX_BARS` are summed into one bar named "other (N)".
 *
 * @since 0.1.0
 */
export const bars = (
  rows: ReadonlyArray<readonly [string, number]>,
  options: { readonly className: string; readonly title: string; readonly color?: string }
): string => {
  const sorted = [...rows].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  const shown: Array<readonly [string, number, boolean]> = sorted.slice(0, MAX_BARS).map(([k, v]) => [k, v, false])
  if (sorted.length > MAX_BARS) {
    const rest = sorted.slice(MAX_BARS)
    shown.push([`other (${rest.length})`, rest.reduce((n, r) => n + r[1], 0), true])
  }
  if (shown.length === 0) return `<p class="muted">none recorded</p>`
  const rowH = 18
  // Drawn small so that text stays legible when three charts share a row.
  const labelW = 130
  const width = 400
  const barMax = width - labelW - 50
  const max = Math.max(1, ...shown.map((r) => r[1]))
  const height = shown.length * rowH + 4
  const color = options.color ?? "#0969da"
  const parts = shown.map(([label, value, other], i) => {
    const y = i * rowH + 2
    const w = value === 0 ? 0 : Math.max(1, Math.round((value / max) * barMax))
    return `<g class="bar${other ? " other" : ""}" data-label="${Html.escape(label)}" data-value="${value}">` +
      `<title>${Html.escape(label)}: ${value}</title>` +
      `<text x="${labelW - 6}" y="${y + 12}" text-anchor="end">${Html.escape(clip(label, 20))}</text>` +
      `<rect x="${labelW}" y="${y + 2}" width="${w}" height="${rowH - 5}" fill="${color}" rx="2"></rect>` +
      `<text x="${labelW + w + 4}" y="${y + 12}">${value}</text></g>`
  })
  return `<svg class="${Html.escape(options.className)}" role="img" aria-label="${Html.escape(options.title)}" ` +
    `viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg">` +
    parts.join("") + `</svg>`
}

/**
 * One series of a line chart: a name, a colour and the cumulative value after
 * each entry (same length for every series of a chart).
 *
 * @since 0.1.0
 */
export interface Series {
  readonly name: string
  readonly color: string
  readonly values: ReadonlyArray<number>
}

const sampleIndexes = (length: number): Array<number> => {
  if (length <= MAX_POINTS) return Array.from({ length }, (_, i) => i)
  const out: Array<number> = []
  const step = (length - 1) / (MAX_POINTS - 1)
  for (let i = 0; i < MAX_POINTS; i++) out.push(Math.round(i * step))
  return out
}

/**
 * A line chart of cumulative series over the entries of a session (x: entry
 * index, y: value), with the final value of each series in the legend and as a
 * `data-final` attribute. `lastEntry` labels the end of the x axis when the
 * series hold fewer points than entries (by default: their length less one).
 *
 * @since 0.1.0
 */
export const lines = (
  series: ReadonlyArray<Series>,
  options: { readonly className: string; readonly title: string; readonly lastEntry?: number }
): string => {
  const length = series[0]?.values.length ?? 0
  if (length === 0) return `<p class="muted">no entries</p>`
  const width = 400
  const height = 190
  const left = 60
  const bottom = 24
  // The legend sits above the plot, never on a line.
  const top = 26
  const plotW = width - left - 10
  const plotH = height - top - bottom
  const idx = sampleIndexes(length)
  // Cumulative series never decrease, but the scale does not rely on it.
  const max = Math.max(1, ...series.flatMap((s) => idx.map((i) => s.values[i] ?? 0)))
  const x = (i: number) => left + (length === 1 ? plotW : (i / (length - 1)) * plotW)
  const y = (v: number) => top + plotH - (v / max) * plotH
  const paths = series.map((s) => {
    const pts = idx.map((i) => `${x(i).toFixed(1)},${y(s.values[i] ?? 0).toFixed(1)}`).join(" ")
    const final = s.values[length - 1] ?? 0
    return `<polyline class="series" data-name="${
      Html.escape(s.name)
    }" data-final="${final}" fill="none" stroke="${s.color}" stroke-width="2" points="${pts}"></polyline>`
  })
  const legend = series.map((s, i) =>
    `<g transform="translate(${left + i * 160},6)"><rect width="10" height="10" fill="${s.color}"></rect>` +
    `<text x="14" y="9">${Html.escape(s.name)}: ${Html.escape(Html.bytes(s.values[length - 1] ?? 0))}</text></g>`
  )
  const axes =
    `<line x1="${left}" y1="${top + plotH}" x2="${left + plotW}" y2="${top + plotH}" stroke="#8c959f"></line>` +
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${top + plotH}" stroke="#8c959f"></line>` +
    `<text x="${left - 4}" y="${top + 10}" text-anchor="end">${Html.escape(Html.bytes(max))}</text>` +
    `<text x="${left - 4}" y="${top + plotH}" text-anchor="end">0</text>` +
    `<text x="${left}" y="${height - 6}">entry 0</text>` +
    `<text x="${left + plotW}" y="${height - 6}" text-anchor="end">entry ${options.lastEntry ?? length - 1}</text>`
  return `<svg class="${Html.escape(options.className)}" role="img" aria-label="${Html.escape(options.title)}" ` +
    `viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg">` +
    axes + paths.join("") + legend.join("") + `</svg>`
}
