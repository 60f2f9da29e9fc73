/**
 * Counts the messages the PostgreSQL adapter sends per record, through the proxy of
 * `packages/postgres/test/wire.ts`: `node --experimental-strip-types
 * --conditions=@session-journal/source bench/scenarios/pgWire.ts` records one
 * caller's and 64 callers' records through the adapter behind the proxy and prints
 * the messages (`S`: one round trip each) and statements per record.
 */
import * as Effect from "effect/Effect"
import { PgPersistence } from "../../packages/postgres/src/index.ts"
import { startProxy } from "../../packages/postgres/test/wire.ts"
import { dropPgTables, pgUrl } from "../lib/adapters.ts"
import { journalRuntime, params, serviceOf } from "../lib/env.ts"

const main = async () => {
  const url = new URL(pgUrl)
  const proxy = await startProxy({ host: url.hostname, port: Number(url.port || 5432) })
  url.host = `127.0.0.1:${proxy.port}`
  const prefix = `wire_${process.pid}_`
  const rt = journalRuntime(PgPersistence.layerFromUrl(url.toString(), { tablePrefix: prefix }))
  const report = (label: string, records: number) => {
    const lines = [`${label}: ${records} records`]
    for (const [k, v] of [...proxy.tally.messages].sort()) {
      const bytes = (proxy.tally.bytes.get(k) ?? 0) / records
      lines.push(`  message ${k}: ${(v / records).toFixed(3)}/record, ${bytes.toFixed(0)} bytes/record`)
    }
    for (const [k, v] of [...proxy.tally.statements].sort((a, b) => b[1] - a[1])) {
      lines.push(`  ${(v / records).toFixed(3)}/record  ${k}`)
    }
    console.log(lines.join("\n"))
    proxy.tally.messages.clear()
    proxy.tally.statements.clear()
    proxy.tally.bytes.clear()
  }
  try {
    const journal = await serviceOf(rt)
    await rt.runPromise(journal.record("warm", params(0)))
    proxy.tally.messages.clear()
    proxy.tally.statements.clear()
    proxy.tally.bytes.clear()
    const n = 500
    await rt.runPromise(Effect.gen(function*() {
      for (let i = 0; i < n; i++) yield* journal.record("seq", params(i))
    }))
    report("sequential", n)
    const callers = 64
    const per = 40
    await rt.runPromise(Effect.forEach(
      Array.from({ length: callers }, (_, c) => c),
      (c) =>
        Effect.gen(function*() {
          for (let i = 0; i < per; i++) yield* journal.record("group", params(c * per + i))
        }),
      { concurrency: "unbounded", discard: true }
    ))
    report(`${callers} callers`, callers * per)
  } finally {
    await rt.dispose()
    await proxy.close()
    dropPgTables(prefix)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
