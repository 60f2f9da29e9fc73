/**
 * What the commands of `TreeCommands` do, loaded only when one of them runs (Ed25519 and
 * the tree stay out of every other command's start): key files, signing, checking a
 * journal against a held checkpoint, proofs.
 *
 * @since 0.1.0
 */
import * as SecretFile from "@session-journal/claude-code/SecretFile"
import { SignedNote, Transparency, TreeHead, Utf8 } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import { CheckpointMismatch, InvalidInput, NotAvailable, VerificationFailed, WitnessRefused } from "../Failure.ts"
import * as Input from "../Input.ts"
import { validId } from "../internal/commandKit.ts"
import * as PublicFile from "../internal/publicFile.ts"
import * as Output from "../Output.ts"
import type * as Storage from "../Storage.ts"
import * as Verify from "../Verify.ts"

const MAX_KEY_BYTES = 64 * 1024

const describeError = (e: unknown): string => messageOf(e)

const readText = (file: string, field: string, maxBytes: number): Effect.Effect<string, InvalidInput> =>
  Effect.tryPromise({
    try: () => Input.readBounded(fs.createReadStream(file), field, maxBytes),
    catch: (e) => new InvalidInput({ field, reason: `cannot read ${file}: ${describeError(e)}` })
  }).pipe(Effect.flatMap(Effect.fromResult))

const fromKeyResult = <A>(field: string, r: Result.Result<A, SignedNote.InvalidKey>) =>
  Result.isSuccess(r) ? Effect.succeed(r.success) : Effect.fail(new InvalidInput({ field, reason: r.failure.message }))

/**
 * Reads a signer key file (`PRIVATE+KEY+…`) as a secret (`SecretFile` of claude-code, the
 * rule of the guard's token files too): a file whose group or others have any
 * permission on it is refused (`InvalidInput` on `--sign`, naming the file and
 * `chmod 600`), never used.
 *
 * @since 0.1.0
 */
export const loadSigner = (file: string): Effect.Effect<SignedNote.Signer, InvalidInput> =>
  Effect.suspend(() => {
    const read = SecretFile.read(file, "signer key", MAX_KEY_BYTES)
    return read._tag === "Refused"
      ? Effect.fail(new InvalidInput({ field: "--sign", reason: read.reason }))
      : fromKeyResult(`--sign ${file}`, SignedNote.parseSigner(read.text))
  })

/**
 * The verifier keys of a `--key` value: a verifier key itself, or a file holding one
 * verifier key per line (blank lines and lines starting with `#` skipped).
 *
 * @since 0.1.0
 */
export const loadVerifiers = (value: string): Effect.Effect<ReadonlyArray<SignedNote.Verifier>, InvalidInput> =>
  Effect.gen(function*() {
    const direct = SignedNote.parseVerifier(value)
    if (Result.isSuccess(direct)) return [direct.success]
    if (!fs.existsSync(value)) return yield* new InvalidInput({ field: "--key", reason: direct.failure.message })
    const text = yield* readText(value, "--key", MAX_KEY_BYTES)
    const out: Array<SignedNote.Verifier> = []
    for (const line of text.split("\n").map((l) => l.trim())) {
      if (line.length === 0 || line.startsWith("#")) continue
      out.push(yield* fromKeyResult(`--key ${value}`, SignedNote.parseVerifier(line)))
    }
    if (out.length === 0) {
      return yield* new InvalidInput({ field: `--key ${value}`, reason: "the file holds no verifier key" })
    }
    return out
  })

// ---------------------------------------------------------------------------
// key generate

const writeKeyFile = (file: string, text: string) =>
  Effect.tryPromise({
    try: async () => {
      // O_EXCL: never replace a key (or follow a link planted where it goes).
      const handle = await fs.promises.open(
        file,
        fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL,
        0o600
      )
      try {
        await handle.chmod(0o600)
        await handle.writeFile(text)
        await handle.sync()
      } finally {
        await handle.close()
      }
    },
    catch: (e) => new InvalidInput({ field: "--out", reason: `cannot create ${file}: ${describeError(e)}` })
  })

/**
 * `key generate NAME --out FILE`: a new signer key written 0600 (never replacing a
 * file), its verifier key printed.
 *
 * @since 0.1.0
 */
export const generateKey = (name: string, out: string, json: boolean) =>
  Effect.gen(function*() {
    const signer = yield* fromKeyResult("name", SignedNote.generate(name))
    yield* writeKeyFile(out, `${SignedNote.encodeSigner(signer)}\n`)
    const vkey = SignedNote.encodeVerifier(signer.verifier)
    if (json) {
      return yield* Output.json({ name, key_id: SignedNote.keyIdHex(signer.verifier.keyId), verifier: vkey, file: out })
    }
    yield* Output.write(`${vkey}\n`)
  })

// ---------------------------------------------------------------------------
// checkpoint --sign

/**
 * `checkpoint ID --sign FILE`: verifies the session's stored chain (as `verify` does),
 * then prints the signed checkpoint of the tree over the entries verified. Read-only:
 * it does not write the journal's own checkpoint.
 *
 * @since 0.1.0
 */
export const signCheckpoint = (id: string, keyFile: string, storage: Storage.Options, json: boolean) =>
  Effect.gen(function*() {
    const { report, signed } = yield* signVerified(id, keyFile, storage)
    if (!json) return yield* Output.write(signed.note)
    yield* Output.json({
      id,
      origin: signed.head.origin,
      tree_size: signed.head.size,
      root: TreeHead.base64(signed.head.root),
      head: report.head,
      note: signed.note
    })
  })

// The whole chain verified, then the tree over exactly the entries verified signed.
const signVerified = (id: string, keyFile: string, storage: Storage.Options) =>
  Effect.gen(function*() {
    yield* validId(id)
    const signer = yield* loadSigner(keyFile)
    const report = yield* Verify.session(id, storage)
    if (!report.ok) {
      yield* Output.errorLine(Verify.text(report))
      return yield* new VerificationFailed({ failed: 1, total: 1 })
    }
    const signed = yield* Transparency.signedCheckpoint(id, signer, { size: report.entries_checked }).pipe(
      Effect.catchTag("NoteRejected", (e) => Effect.die(e))
    )
    return { signer, report, signed }
  })

// ---------------------------------------------------------------------------
// witness

const MAX_WITNESS_RESPONSE = 64 * 1024

interface WitnessAnswer {
  readonly status: number
  readonly contentType: string
  readonly body: string
}

const post = (url: string, body: string) =>
  Effect.tryPromise({
    try: async (): Promise<WitnessAnswer> => {
      const response = await fetch(url, {
        method: "POST",
        body,
        headers: { "content-type": "text/plain; charset=utf-8" },
        signal: AbortSignal.timeout(30_000)
      })
      const bytes = new Uint8Array(await response.arrayBuffer())
      if (bytes.length > MAX_WITNESS_RESPONSE) {
        throw new Error(`the answer is longer than ${MAX_WITNESS_RESPONSE} bytes`)
      }
      return {
        status: response.status,
        contentType: response.headers.get("content-type") ?? "",
        body: Utf8.decodeStrict(bytes)
      }
    },
    catch: (e) => new NotAvailable({ feature: "witness", reason: `${url} did not answer: ${describeError(e)}` })
  })

/**
 * The body of a C2SP `tlog-witness` `add-checkpoint` request: `old <size>`, the
 * consistency proof one base64 hash a line, a blank line, the signed checkpoint.
 *
 * @since 0.1.0
 */
export const addCheckpointBody = (oldSize: number, proof: ReadonlyArray<Uint8Array>, note: string): string =>
  `old ${oldSize}\n${proof.map((p) => `${TreeHead.base64(p)}\n`).join("")}\n${note}`

/**
 * What a witness cosigned: the size it had cosigned before (the old size of the
 * consistency proof it checked), its verified cosignatures, and the signed note with
 * those cosignature lines appended (the log's own signature first).
 *
 * @since 0.1.0
 */
export interface Cosigned {
  readonly oldSize: number
  readonly cosignedBy: ReadonlyArray<{ readonly name: string; readonly timestamp: number }>
  readonly note: string
}

/**
 * Asks the C2SP `tlog-witness` at `url` to cosign a signed checkpoint of session `id`:
 * `POST URL/add-checkpoint` with `old 0`, then, when the witness answers 409 with the
 * size it cosigned before, again with the consistency proof from that size
 * (`proofFrom`). 409 twice (it cosigned more than the checkpoint holds) and 422 (the
 * checkpoint is not consistent with what it cosigned: a fork) are `WitnessRefused`, as
 * is a 200 without a cosignature that verifies with `witnessVerifiers`.
 *
 * @since 0.1.0
 */
export const cosign = <E, R>(
  url: string,
  id: string,
  signed: { readonly head: TreeHead.TreeHead; readonly note: string },
  witnessVerifiers: ReadonlyArray<SignedNote.Verifier>,
  proofFrom: (oldSize: number) => Effect.Effect<ReadonlyArray<Uint8Array>, E, R>
): Effect.Effect<Cosigned, WitnessRefused | NotAvailable | E, R> =>
  Effect.gen(function*() {
    const endpoint = `${url.replace(/\/+$/, "")}/add-checkpoint`
    const size = signed.head.size
    const refused = (status: number, detail: string) => new WitnessRefused({ url: endpoint, id, status, detail })
    let oldSize = 0
    let answer = yield* post(endpoint, addCheckpointBody(0, [], signed.note))
    if (answer.status === 409) {
      const known = /^(0|[1-9][0-9]*)\n$/.exec(answer.body)
      if (known === null || !answer.contentType.startsWith("text/x.tlog.size")) {
        return yield* refused(409, "its 409 answer is not a tree size")
      }
      oldSize = Number(known[1])
      if (oldSize > size) {
        return yield* refused(
          409,
          `it has cosigned a tree of ${oldSize} entries; the journal holds ${size}: entries were cut`
        )
      }
      const proof = yield* proofFrom(oldSize)
      answer = yield* post(endpoint, addCheckpointBody(oldSize, proof, signed.note))
    }
    if (answer.status === 409) return yield* refused(409, `its size changed while we asked: ${answer.body.trim()}`)
    if (answer.status === 422) {
      return yield* refused(
        422,
        `the journal is not consistent with the tree of ${oldSize} entries it cosigned before (${answer.body.trim()})`
      )
    }
    if (answer.status !== 200) return yield* refused(answer.status, answer.body.trim().slice(0, 200))
    // The answer is signature lines: with the checkpoint they make a note to open.
    const cosigned = `${signed.note}${answer.body}`
    const opened = SignedNote.open(cosigned, witnessVerifiers)
    if (Result.isFailure(opened)) {
      return yield* refused(200, `its cosignature does not verify: ${opened.failure.message}`)
    }
    const cosignatures = opened.success.verified.filter((v) => v.verifier.type === SignedNote.COSIGNATURE_V1)
    if (cosignatures.length === 0) return yield* refused(200, "it returned no cosignature by the witness keys given")
    // Keep the log's signature and the verified cosignatures only.
    const kept = answer.body.split("\n").filter((line) => {
      const one = SignedNote.parse(`x\n\n${line}\n`)
      const sig = Result.isSuccess(one) ? one.success.signatures[0] : undefined
      return sig !== undefined &&
        cosignatures.some((c) => c.verifier.name === sig.name && c.verifier.keyId === sig.keyId)
    })
    return {
      oldSize,
      cosignedBy: cosignatures.map((c) => ({ name: c.verifier.name, timestamp: Number(c.timestamp) })),
      note: `${signed.note}${kept.map((l) => `${l}\n`).join("")}`
    }
  })

/**
 * `witness URL ID --sign FILE --witness-key VKEY --out FILE`: signs the session's
 * checkpoint, submits it to the witness (`cosign`), and writes the cosigned checkpoint
 * to the output file. 409 twice (the witness cosigned more than the journal holds) and
 * 422 (the journal is not consistent with what it cosigned) are exit 1.
 *
 * @since 0.1.0
 */
export const witness = (
  url: string,
  id: string,
  options: {
    readonly keyFile: string
    readonly witnessKeys: ReadonlyArray<string>
    readonly out: string
    readonly storage: Storage.Options
    readonly json: boolean
  }
) =>
  Effect.gen(function*() {
    const witnessVerifiers = yield* loadWitnessKeys(options.witnessKeys)
    const { signed } = yield* signVerified(id, options.keyFile, options.storage)
    const size = signed.head.size
    const c = yield* cosign(
      url,
      id,
      signed,
      witnessVerifiers,
      (oldSize) => Effect.map(Transparency.consistency(id, oldSize, size), (p) => p.proof)
    )
    yield* writeFileAtomic(options.out, c.note)
    if (options.json) {
      return yield* Output.json({
        id,
        tree_size: size,
        old_size: c.oldSize,
        cosigned_by: c.cosignedBy,
        file: options.out
      })
    }
    yield* Output.lines([
      `${id}: the checkpoint of ${size} entries is cosigned by ${
        c.cosignedBy.map((w) => w.name).join(", ")
      } (consistent with ${c.oldSize}); written to ${options.out}`
    ])
  })

/**
 * The verifier keys of `--witness-key` values; at least one is needed.
 *
 * @since 0.1.0
 */
export const loadWitnessKeys = (values: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (values.length === 0) {
      return yield* new InvalidInput({
        field: "--witness-key",
        reason: "the witness's verifier key is needed to check its cosignatures"
      })
    }
    return (yield* Effect.forEach(values, loadVerifiers)).flat()
  })

const writeFileAtomic = (file: string, text: string) =>
  Effect.flatMap(Random.Random, (random) =>
    Effect.tryPromise({
      try: () => PublicFile.write(file, text, random),
      catch: (e) => new InvalidInput({ field: "--out", reason: `cannot write ${file}: ${describeError(e)}` })
    }))

// ---------------------------------------------------------------------------
// verify --checkpoint

/**
 * What `verify --checkpoint` found: the chain's report, the checkpoint's claims, who
 * signed and cosigned it, and how the journal relates to it.
 *
 * @since 0.1.0
 */
export interface CheckpointReport {
  readonly id: string
  readonly ok: boolean
  readonly origin: string
  readonly tree_size: number
  readonly root: string
  readonly signed_by: ReadonlyArray<string>
  readonly cosigned_by: ReadonlyArray<{ readonly name: string; readonly timestamp: number }>
  readonly current_size: number | null
  readonly current_root: string | null
  readonly problem: null | { readonly reason: CheckpointMismatch["reason"]; readonly detail: string }
}

/**
 * `verify ID --checkpoint FILE --key VKEY…`: the checkpoint must be signed by one of the
 * keys (an Ed25519 key; cosignatures by the other keys are reported), be this session's
 * (origin `<key name>/<ID>`), the stored chain must verify, and the tree at the
 * checkpoint's size must have its root, with a verified consistency proof to the
 * current tree.
 *
 * @since 0.1.0
 */
export const verifyCheckpoint = (
  id: string,
  file: string,
  keys: ReadonlyArray<string>,
  storage: Storage.Options,
  json: boolean
) =>
  Effect.gen(function*() {
    yield* validId(id)
    if (keys.length === 0) {
      return yield* new InvalidInput({ field: "--key", reason: "--checkpoint needs the verifier key of its signer" })
    }
    const verifiers = (yield* Effect.forEach(keys, loadVerifiers)).flat()
    const note = yield* readText(file, "--checkpoint", SignedNote.MAX_NOTE_BYTES)
    const opened = SignedNote.open(note, verifiers)
    if (Result.isFailure(opened)) {
      if (opened.failure.reason === "malformed") {
        return yield* new InvalidInput({ field: `--checkpoint ${file}`, reason: opened.failure.message })
      }
      return yield* new CheckpointMismatch({ id, reason: "signature", detail: opened.failure.message })
    }
    const parsed = TreeHead.parse(opened.success.text)
    if (Result.isFailure(parsed)) {
      return yield* new InvalidInput({ field: `--checkpoint ${file}`, reason: parsed.failure.message })
    }
    const head = parsed.success
    const signers = opened.success.verified.filter((v) => v.verifier.type === SignedNote.ED25519)
    const cosigners = opened.success.verified.filter((v) => v.verifier.type === SignedNote.COSIGNATURE_V1)
    const base = {
      id,
      origin: head.origin,
      tree_size: head.size,
      root: TreeHead.base64(head.root),
      signed_by: signers.map((v) => v.verifier.name),
      cosigned_by: cosigners.map((v) => ({ name: v.verifier.name, timestamp: Number(v.timestamp) }))
    }
    const finish = (current: { size: number; root: string | null } | null, problem: CheckpointReport["problem"]) =>
      Effect.succeed<CheckpointReport>({
        ...base,
        ok: problem === null,
        current_size: current?.size ?? null,
        current_root: current?.root ?? null,
        problem
      })
    if (signers.length === 0) {
      return yield* finish(null, {
        reason: "signature",
        detail: "only cosignatures verified; no key given signed it as its log"
      })
    }
    const origin = signers.map((v) => TreeHead.origin(v.verifier.name, id)).find((o) => o === head.origin)
    if (origin === undefined) {
      return yield* finish(null, {
        reason: "other_log",
        detail: `its origin is ${JSON.stringify(head.origin)}, this session's is ${
          JSON.stringify(TreeHead.origin(signers[0]!.verifier.name, id))
        }`
      })
    }
    const chain = yield* Verify.session(id, storage)
    if (!chain.ok) return yield* finish(null, { reason: "chain", detail: Verify.text(chain) })
    const checked = yield* Effect.result(Transparency.checkHead(id, head, origin))
    if (Result.isFailure(checked)) {
      const e = checked.failure
      if (e._tag === "TreeUnavailable") return yield* finish(null, { reason: "tree", detail: e.message })
      return yield* e
    }
    const c = checked.success
    switch (c._tag) {
      case "consistent":
        return yield* finish({ size: c.currentSize, root: TreeHead.base64(c.currentRoot) }, null)
      case "cut":
        return yield* finish({ size: c.currentSize, root: null }, {
          reason: "cut",
          detail:
            `the checkpoint covers ${c.size} entries, the journal holds ${c.currentSize}: entries ${c.currentSize}..${
              c.size - 1
            } are gone`
        })
      case "replaced":
        return yield* finish(null, {
          reason: "replaced",
          detail: `the tree of its first ${c.size} entries has root ${
            TreeHead.base64(c.storedRoot)
          }, the checkpoint says ${TreeHead.base64(c.root)}: entries it covers were edited or replaced`
        })
      case "other_log":
        return yield* finish(null, { reason: "other_log", detail: `its origin is ${c.origin}, expected ${c.expected}` })
    }
  }).pipe(Effect.flatMap((report) => reportCheckpoint(report, json)))

const reportCheckpoint = (r: CheckpointReport, json: boolean) =>
  Effect.gen(function*() {
    if (json) yield* Output.json({ checkpoint: r })
    else yield* Output.lines(checkpointText(r))
    if (r.problem !== null) {
      return yield* new CheckpointMismatch({ id: r.id, reason: r.problem.reason, detail: r.problem.detail })
    }
  })

/**
 * Human output for a checkpoint report.
 *
 * @since 0.1.0
 */
export const checkpointText = (r: CheckpointReport): Array<string> => [
  r.ok
    ? `${r.id}: consistent with the checkpoint of ${r.tree_size} entries (now ${r.current_size}), signed by ${
      r.signed_by.join(", ")
    }`
    : `${r.id}: DOES NOT MATCH the checkpoint of ${r.tree_size} entries (${r.problem?.reason}): ${r.problem?.detail}`,
  `  origin ${r.origin}, root ${r.root}`,
  ...r.cosigned_by.map((c) => `  cosigned by ${c.name} at ${new Date(c.timestamp * 1000).toISOString()}`)
]

// ---------------------------------------------------------------------------
// prove / consistency

const sizeProblem = (e: Transparency.ScanError): Effect.Effect<never, Transparency.ScanError | InvalidInput> =>
  e._tag === "TreeUnavailable" && e.reason === "size"
    ? Effect.fail(new InvalidInput({ field: "size", reason: e.detail }))
    : Effect.fail(e)

const nodes = (proof: ReadonlyArray<Uint8Array>) => proof.map(TreeHead.base64)

/**
 * `prove ID SEQUENCE [--size N]`.
 *
 * @since 0.1.0
 */
export const prove = (id: string, sequence: number, size: number | undefined, json: boolean) =>
  Effect.gen(function*() {
    yield* validId(id)
    const p = yield* Transparency.inclusion(id, sequence, size).pipe(Effect.catch(sizeProblem))
    const out = {
      leaf_index: p.leafIndex,
      tree_size: p.treeSize,
      entry_hash: p.entry.entry_hash,
      proof: nodes(p.proof)
    }
    if (json) return yield* Output.json(out)
    yield* Output.lines([
      `entry ${p.leafIndex} (${p.entry.entry_hash}) is in the tree of ${p.treeSize} entries with root ${
        TreeHead.base64(p.root)
      }`,
      ...out.proof.map((n, i) => `  ${i} ${n}`)
    ])
  })

/**
 * `consistency ID OLD NEW`.
 *
 * @since 0.1.0
 */
export const consistency = (id: string, oldSize: number, newSize: number, json: boolean) =>
  Effect.gen(function*() {
    yield* validId(id)
    const p = yield* Transparency.consistency(id, oldSize, newSize).pipe(Effect.catch(sizeProblem))
    const out = { old_size: p.oldSize, new_size: p.newSize, proof: nodes(p.proof) }
    if (json) return yield* Output.json(out)
    yield* Output.lines([
      `the tree of ${p.oldSize} entries (root ${
        TreeHead.base64(p.oldRoot)
      }) is a prefix of the tree of ${p.newSize} (root ${TreeHead.base64(p.newRoot)})`,
      ...out.proof.map((n, i) => `  ${i} ${n}`)
    ])
  })
