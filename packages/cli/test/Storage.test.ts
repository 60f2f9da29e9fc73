/**
 * The storage environment is one `Config`: a plain variable record (the command
 * hook's) reads as the command tree reads its `ConfigProvider`, an empty value is
 * no value, and only `SESSION_JOURNAL_RETENTION=1` turns retention on.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as Storage from "../src/Storage.ts"

const SEED = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 31))

const value = fc.option(fc.oneof(fc.constantFrom("", "1", "0", " ", "/j", "postgres://x"), fc.string()), {
  nil: undefined
})
const names = [Storage.DIR_VAR, Storage.PG_URL_VAR, Storage.TABLE_PREFIX_VAR, Storage.RETENTION_VAR, "OTHER"]
const env = fc.tuple(...names.map(() => value)).map((vs) =>
  Object.fromEntries(names.map((n, i) => [n, vs[i]]).filter(([, v]) => v !== undefined))
)

const present = (v: string | undefined) => v !== undefined && v.length > 0 ? v : undefined

describe(`Storage.environmentOf (seed ${SEED})`, () => {
  it("reads a variable record as the command's ConfigProvider does, empty values as none", () => {
    fc.assert(
      fc.property(env, (e: Record<string, string | undefined>) => {
        const got = Storage.environmentOf(e)
        assert.deepStrictEqual(got, {
          dir: present(e[Storage.DIR_VAR]),
          postgres: present(e[Storage.PG_URL_VAR]),
          tablePrefix: present(e[Storage.TABLE_PREFIX_VAR]),
          removeCheckpointedSegments: e[Storage.RETENTION_VAR] === "1"
        })
        const viaProvider = Effect.runSync(
          Storage.environment.parse(ConfigProvider.fromEnvRecord(e))
        )
        assert.deepStrictEqual(got, viaProvider)
      }),
      { seed: SEED, numRuns: 300 }
    )
  })
})
