/**
 * The Go programs of `fixtures/` that check our output with an independent
 * implementation (Go's `sumdb/note` and `sumdb/tlog`), built in GOPATH mode against
 * Debian's golang-golang-x-mod-dev; the tests that use them skip when Go is not installed.
 */
import { assert } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { tempDir } from "./Run.ts"

const GOPATH = "/usr/share/gocode"

/** Whether Go and `golang.org/x/mod/sumdb` are installed. */
export const hasGo = spawnSync("go", ["version"]).status === 0 &&
  fs.existsSync(path.join(GOPATH, "src/golang.org/x/mod/sumdb/tlog"))

const built = new Map<string, string>()

/** The binary of `fixtures/<name>`, built once per test file. */
export const goProgram = (name: string): string => {
  const known = built.get(name)
  if (known !== undefined) return known
  const out = path.join(tempDir(), name)
  const src = fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))
  const r = spawnSync("go", ["build", "-o", out, "."], {
    cwd: src,
    env: { ...process.env, GO111MODULE: "off", GOPATH, GOCACHE: path.join(path.dirname(out), "gocache"), GOFLAGS: "" },
    encoding: "utf8"
  })
  assert.strictEqual(r.status, 0, r.stderr)
  built.set(name, out)
  return out
}
