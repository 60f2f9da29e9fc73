/**
 * `session-journal witness URL ID` against a C2SP `tlog-witness` written here from the
 * specification (an HTTP server on 127.0.0.1 that keeps the latest cosigned size and
 * root per origin): the first submission learns the witness's size from its 409 and
 * resubmits with a consistency proof; the cosigned checkpoint is written and
 * `verify --checkpoint` reports who cosigned it; a replaced session is refused with 422,
 * a cut one with the witness's 409, a key it does not trust with 403, each exit 1.
 */
import { assert, describe, it } from "@effect/vitest"
import { SignedNote } from "@session-journal/core"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, run, tempDir } from "./Run.ts"
import { startWitness } from "./WitnessServer.ts"

afterAll(cleanup)

const importEntries = async (dir: string, id: string, n: number, tool: string) => {
  const input = Array.from(
    { length: n },
    (_, i) => JSON.stringify({ tool_name: `${tool}-${i}`, server_id: "s", agent_id: "a" }) + "\n"
  ).join("")
  const r = await run(["--dir", dir, "import", id, "-"], { input })
  assert.strictEqual(r.code, 0, r.stderr)
}

describe("session-journal witness", () => {
  it("gets a cosignature, with a consistency proof from what the witness saw; 422 and 409 refuse", async () => {
    const dir = tempDir()
    const keyFile = path.join(dir, "log.key")
    const gen = await run(["key", "generate", "journal.test/j", "--out", keyFile])
    assert.strictEqual(gen.code, 0, gen.stderr)
    const logKey = SignedNote.parseVerifier(gen.stdout.trim())
    assert.isTrue(Result.isSuccess(logKey))
    if (!Result.isSuccess(logKey)) return
    const w = await startWitness(logKey.success)
    try {
      const out = path.join(dir, "s.cosigned")
      const submit = (id: string) =>
        run(["--dir", dir, "--json", "witness", w.url, id, "--sign", keyFile, "--witness-key", w.vkey, "--out", out])

      await importEntries(dir, "s", 4, "a")
      const first = await submit("s")
      assert.strictEqual(first.code, 0, first.stderr)
      assert.deepInclude(JSON.parse(first.stdout), { tree_size: 4, old_size: 0 })
      assert.deepStrictEqual(w.requests.map((r) => r.status), [200])

      await importEntries(dir, "s", 3, "b")
      const second = await submit("s")
      assert.strictEqual(second.code, 0, second.stderr)
      assert.deepInclude(JSON.parse(second.stdout), { tree_size: 7, old_size: 4 })
      // It learnt the witness's size from the 409, then sent the proof from 4 to 7 (one node: the tree of 4 is a subtree).
      assert.deepStrictEqual(w.requests.slice(1), [{ old: 0, proofLines: 0, status: 409 }, {
        old: 4,
        proofLines: 1,
        status: 200
      }])

      const cosigned = fs.readFileSync(out, "utf8")
      assert.strictEqual(cosigned.split("\n").filter((l) => l.startsWith("\u2014 ")).length, 2)
      const verified = await run([
        "--dir",
        dir,
        "--json",
        "verify",
        "s",
        "--checkpoint",
        out,
        "--key",
        gen.stdout.trim(),
        "--key",
        w.vkey
      ])
      assert.strictEqual(verified.code, 0, verified.stderr)
      const report = JSON.parse(verified.stdout).checkpoint
      assert.deepStrictEqual(report.signed_by, ["journal.test/j"])
      assert.deepStrictEqual(report.cosigned_by.map((c: { name: string }) => c.name), ["witness.test/w1"])
      const human = await run([
        "--dir",
        dir,
        "verify",
        "s",
        "--checkpoint",
        out,
        "--key",
        gen.stdout.trim(),
        "--key",
        w.vkey
      ])
      assert.match(human.stdout, /cosigned by witness\.test\/w1 at \d{4}-/)

      // Replaced by another chain of more entries: the proof from 7 does not verify (422).
      fs.rmSync(path.join(dir, "s"), { recursive: true })
      await importEntries(dir, "s", 9, "c")
      const replaced = await submit("s")
      assert.strictEqual(replaced.code, 1)
      assert.match(
        replaced.stderr,
        /did not cosign s \(422\): the journal is not consistent with the tree of 7 entries/
      )

      // Cut below what the witness cosigned: its 409 says 7, the journal holds 5.
      fs.rmSync(path.join(dir, "s"), { recursive: true })
      await importEntries(dir, "s", 5, "a")
      const cut = await submit("s")
      assert.strictEqual(cut.code, 1)
      assert.match(cut.stderr, /\(409\): it has cosigned a tree of 7 entries; the journal holds 5: entries were cut/)
      // The cosigned checkpoint from before is kept as it was.
      assert.strictEqual(fs.readFileSync(out, "utf8"), cosigned)

      const noKey = await run(["--dir", dir, "witness", w.url, "s", "--sign", keyFile, "--out", out])
      assert.strictEqual(noKey.code, 2)

      // A signer key others may read is refused before anything is sent.
      const asked = w.requests.length
      fs.chmodSync(keyFile, 0o644)
      const exposed = await run([
        "--dir",
        dir,
        "witness",
        w.url,
        "s",
        "--sign",
        keyFile,
        "--witness-key",
        w.vkey,
        "--out",
        path.join(dir, "never")
      ])
      assert.strictEqual(exposed.code, 2, exposed.stderr)
      assert.include(exposed.stderr, `the signer key ${keyFile} may be read by others (mode 644); chmod 600 ${keyFile}`)
      assert.strictEqual(w.requests.length, asked, "the witness was asked with an exposed key")
      assert.isFalse(fs.existsSync(path.join(dir, "never")))
      fs.chmodSync(keyFile, 0o600)

      // A journal key the witness does not trust for the origin: 403.
      const stranger = path.join(dir, "stranger.key")
      const other = await run(["key", "generate", "journal.test/j", "--out", stranger])
      assert.strictEqual(other.code, 0, other.stderr)
      const untrusted = await run([
        "--dir",
        dir,
        "witness",
        w.url,
        "s",
        "--sign",
        stranger,
        "--witness-key",
        w.vkey,
        "--out",
        out
      ])
      assert.strictEqual(untrusted.code, 1)
      assert.match(untrusted.stderr, /did not cosign s \(403\)/)
    } finally {
      await w.close()
    }
  })
})
