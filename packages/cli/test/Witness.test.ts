/**
 * `session-journal witness URL ID` against a C2SP `tlog-witness` written here from the
 * specification (an HTTP server on 127.0.0.1 that keeps the latest cosigned size and
 * root per origin): the first submission learns the witness's size from its 409 and
 * resubmits with a consistency proof; the cosigned checkpoint is written and
 * `verify --checkpoint` reports who cosigned it; a replaced session is refused with 422,
 * a cut one with the witness's 409, a key it does not trust with 403, each exit 1.
 */
import { assert, describe, it } from "@effect/vitest"
import { Merkle, SignedNote, TreeHead } from "@session-journal/core"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, run, tempDir } from "./Run.ts"

afterAll(cleanup)

interface Witness {
  readonly url: string
  readonly vkey: string
  readonly requests: Array<{ readonly old: number; readonly proofLines: number; readonly status: number }>
  readonly close: () => Promise<void>
}

const text = (res: http.ServerResponse, status: number, body: string, type = "text/plain; charset=utf-8") => {
  res.writeHead(status, { "content-type": type })
  res.end(body)
}

/** A witness as tlog-witness describes it, trusting `logKeys` for their origins under `prefix/`. */
const startWitness = async (logKey: SignedNote.Verifier): Promise<Witness> => {
  const self = SignedNote.signerFromSeed("witness.test/w1", new Uint8Array(32).fill(42), SignedNote.COSIGNATURE_V1)
  assert.isTrue(Result.isSuccess(self))
  const me = Result.isSuccess(self) ? self.success : undefined!
  const latest = new Map<string, { size: number; root: Uint8Array }>()
  const requests: Witness["requests"] = []
  const handle = (body: string, res: http.ServerResponse) => {
    // old size line, proof lines, an empty line, the checkpoint.
    const blank = body.indexOf("\n\n")
    if (blank < 0) return text(res, 400, "no empty line\n")
    const head = body.slice(0, blank).split("\n")
    const note = body.slice(blank + 2)
    const old = /^old (0|[1-9][0-9]*)$/.exec(head[0] ?? "")
    if (old === null || head.length - 1 > 63) return text(res, 400, "bad old size line\n")
    const proof = head.slice(1).map((l) => TreeHead.fromBase64(l))
    if (proof.some((p) => p === undefined || p.length !== 32)) return text(res, 400, "bad proof line\n")
    const oldSize = Number(old[1])
    const origin = note.slice(0, note.indexOf("\n"))
    if (!origin.startsWith(`${logKey.name}/`)) return text(res, 404, "unknown origin\n")
    const opened = SignedNote.open(note, [logKey])
    if (Result.isFailure(opened)) return text(res, 403, "no valid signature\n")
    const cp = TreeHead.parse(opened.success.text)
    if (Result.isFailure(cp)) return text(res, 400, "not a checkpoint\n")
    const { root, size } = cp.success
    const record = (status: number) => requests.push({ old: oldSize, proofLines: proof.length, status })
    if (oldSize > size) return record(400), text(res, 400, "old size is larger\n")
    const known = latest.get(origin) ?? { size: 0, root: Merkle.emptyRoot() }
    if (oldSize !== known.size) return record(409), text(res, 409, `${known.size}\n`, "text/x.tlog.size")
    if (size === 0 && !Merkle.equals(root, Merkle.emptyRoot())) {
      return record(422), text(res, 422, "size 0, other root\n")
    }
    if (oldSize === 0 && proof.length > 0) return record(422), text(res, 422, "proof from 0\n")
    if (oldSize === size && !Merkle.equals(root, known.root)) {
      return record(422), text(res, 422, "same size, other root\n")
    }
    if (
      oldSize > 0 &&
      Result.isFailure(Merkle.verifyConsistency(oldSize, size, proof as Array<Uint8Array>, known.root, root))
    ) {
      return record(422), text(res, 422, "consistency proof does not verify\n")
    }
    latest.set(origin, { size, root })
    record(200)
    text(res, 200, SignedNote.signatureFor(me, opened.success.text, BigInt(Math.floor(Date.now() / 1000))))
  }
  const server = http.createServer((req, res) => {
    if (req.method !== "POST" || req.url !== "/w/add-checkpoint") return text(res, 404, "not found\n")
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => handle(Buffer.concat(chunks).toString("utf8"), res))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/w`,
    vkey: SignedNote.encodeVerifier(me.verifier),
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve()))
  }
}

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
