/**
 * A C2SP `tlog-witness` written from the specification, for the tests of the commands
 * that ask one to cosign: an HTTP server on 127.0.0.1 (`POST <url>/add-checkpoint`)
 * trusting one log key for its origins, keeping the latest cosigned size and root per
 * origin, answering 404/403/400/409/422 as specified, and recording each request.
 */
import { assert } from "@effect/vitest"
import { Merkle, SignedNote, TreeHead } from "@session-journal/core"
import * as Result from "effect/Result"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface Witness {
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
export const startWitness = async (logKey: SignedNote.Verifier): Promise<Witness> => {
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
