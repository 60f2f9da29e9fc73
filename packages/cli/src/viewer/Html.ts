/**
 * Building HTML text safely: every value that reaches a page goes through
 * `escape` (text and attribute values alike), so transcripts holding markup,
 * script-like text or broken UTF-16 are shown as text, never interpreted.
 * Plain string building, no DOM: the report writer and the viewer share it.
 *
 * @since 0.1.0
 */

const replacements: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  "\"": "&quot;",
  "'": "&#39;"
}

// A lone surrogate cannot be written as UTF-8; it is shown as U+FFFD.
const special = /[&<>"']|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/**
 * Escapes text for HTML element content and quoted attribute values: `& < > " '`
 * become character references and lone surrogates become U+FFFD.
 *
 * @since 0.1.0
 */
export const escape = (value: string | number | bigint | boolean): string => {
  const s = String(value)
  // Most values need nothing: test before replacing.
  return needsEscape.test(s) ? s.replace(special, (c) => replacements[c] ?? "\uFFFD") : s
}

const needsEscape = /[&<>"'\uD800-\uDFFF]/

/**
 * JSON text of a value for display, pretty-printed; undefined becomes `null`.
 * Lone surrogates come out as `\uXXXX` escapes (JSON.stringify is well-formed).
 *
 * @since 0.1.0
 */
export const jsonText = (value: unknown, indent = 2): string => {
  try {
    return JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v), indent) ?? "null"
  } catch {
    return String(value)
  }
}

/**
 * A time in seconds since the epoch as an ISO 8601 UTC string (the number itself
 * when it is not a valid date).
 *
 * @since 0.1.0
 */
export const isoSeconds = (secs: number): string => {
  const d = new Date(secs * 1000)
  return Number.isNaN(d.getTime()) ? String(secs) : d.toISOString().replace(".000Z", "Z")
}

/**
 * A byte count with a binary unit (`512 B`, `2.0 KiB`, `3.4 MiB`).
 *
 * @since 0.1.0
 */
export const bytes = (n: number | bigint): string => {
  const v = Number(n)
  if (v < 1024) return `${v} B`
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
  let x = v / 1024
  let i = 0
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024
    i++
  }
  return `${x.toFixed(1)} ${units[i]}`
}

/**
 * The first 12 hex digits of a hash, as `show` prints them.
 *
 * @since 0.1.0
 */
export const shortHash = (hash: string): string => hash.slice(0, 12)

/**
 * The style sheet shared by the report and the viewer. No external fonts or
 * images: the page works offline and from `file://`.
 *
 * @since 0.1.0
 */
export const STYLE = `
:root{color-scheme:light;--fg:#1b1f24;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--soft:#f6f8fa;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--acc:#0969da}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1200px;margin:0 auto;padding:16px 20px 48px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;background:var(--soft);padding:6px 8px;border-radius:4px;max-height:40em;overflow:auto}
a{color:var(--acc)}
.muted{color:var(--muted)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;word-break:break-all}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;border:1px solid currentColor}
.badge.ok{color:var(--ok)}.badge.bad{color:var(--bad)}.badge.warn{color:var(--warn)}
.verify{border:1px solid var(--line);border-radius:6px;padding:8px 12px;margin:12px 0;background:var(--soft)}
.verify.failed{border-color:var(--bad)}
tr[data-verified=false]{background:repeating-linear-gradient(135deg,transparent 0 8px,rgba(207,34,46,.06) 8px 16px)}
tr[data-mark=failed-here]{outline:2px solid var(--bad)}
tr[data-mark=failed-here] td:first-child::after{content:" ✗ verification failed here";color:var(--bad);font-weight:600}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:16px}
.chart{border:1px solid var(--line);border-radius:6px;padding:8px;min-width:0}
.chart h3{font-size:13px;margin:0 0 4px}
.chart svg{width:100%;height:auto}
.chart svg text{font:11px system-ui,sans-serif;fill:var(--fg)}
table.tl{border-collapse:collapse;width:100%;table-layout:fixed}
table.tl td,table.tl th{border-bottom:1px solid var(--line);padding:3px 6px;vertical-align:top;text-align:left;overflow-wrap:anywhere}
table.tl th{background:var(--soft);font-weight:600;font-size:12px}
table.tl col.seq{width:64px}table.tl col.time{width:172px}table.tl col.kind{width:90px}table.tl col.hash{width:110px}
table.tl td:nth-child(1),table.tl td:nth-child(2),table.tl td:nth-child(5),table.tl code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
table.tl td:nth-child(2){white-space:nowrap}
table.tl i{font-style:normal;color:var(--muted)}
table.tl em{font-style:normal;font-weight:600;color:var(--ok)}
table.tl .text{white-space:pre-wrap}
tr.denied{background:#ffebe9}
tr.denied em{color:var(--bad);font-weight:700}
tr.msg td:nth-child(4){background:#f3f8ff}
tr.msg.role-user td:nth-child(4){background:#fff8e6}
.role{margin-right:6px}
tr.turn.role-note td:nth-child(4){background:none}
tr.turn.sub td:nth-child(4){border-left:3px solid #8250df}
.agent{color:#8250df;font-size:12px}
.use,.result{margin:2px 0}.result.failed em{color:var(--bad)}
details.raw>summary,details.thinking>summary{font-size:12px}
.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:8px 0}
.filters select,.filters input{font:inherit;padding:2px 6px}
tr[hidden]{display:none}
details.page{margin:4px 0;border:1px solid var(--line);border-radius:6px}
details.page>summary{padding:4px 8px;cursor:pointer;background:var(--soft)}
details.page>div{content-visibility:auto;contain-intrinsic-size:auto 20000px}
summary{cursor:pointer}
table.wf{border-collapse:collapse;width:100%;table-layout:fixed;font-size:13px}
table.wf th,table.wf td{border-bottom:1px solid var(--line);padding:2px 6px;text-align:left;vertical-align:middle}
table.wf th{background:var(--soft);font-weight:600;font-size:12px}
table.wf col.wf-time{width:80px}table.wf col.wf-axis{width:45%}
td.wf-label{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
td.wf-time{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;text-align:right}
td.wf-axis{position:relative;height:18px}
.wf-bar{position:absolute;top:4px;height:10px;min-width:2px;background:var(--acc);border-radius:2px}
.wf-bar.open{background:none;border-left:2px dashed var(--muted)}
tr.wf-agent .wf-bar{background:#8250df;opacity:.55}
tr.wf-denied .wf-bar{background:var(--bad)}
tr.wf-denied em{font-style:normal;font-weight:700;color:var(--bad)}
.wf-agent{color:#8250df}
.err{color:var(--bad)}
table.list{border-collapse:collapse;width:100%}
table.list td,table.list th{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left}
table.list tbody.story{border-left:3px solid #8250df}
table.list tr.story-head th{background:var(--soft);font-weight:600}table.list tr.story-head .muted{font-weight:400}
table.list .badge.role{color:#8250df;margin-left:6px;font-family:system-ui,sans-serif}
tbody[hidden]{display:none}
`
