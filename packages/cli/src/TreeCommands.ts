/**
 * Heads an outside verifier can hold (core's `Transparency`, docs/DESIGN.md §13):
 * `key generate NAME --out FILE` writes an Ed25519 signer key in the signed-note key
 * format (mode 0600) and prints its verifier key; `checkpoint ID --sign FILE` prints a
 * signed C2SP checkpoint of the session's RFC 6962 tree; `verify ID --checkpoint FILE
 * --key VKEY` checks the signature and that the journal is consistent with that
 * checkpoint; `prove ID SEQUENCE [--size N]` and `consistency ID OLD NEW` print the
 * inclusion and consistency proofs a third party checks with a checkpoint alone.
 *
 * Everything reads the session without its lock, so it runs next to a writer.
 *
 * @since 0.5.0
 */
import {
  SignedNote,
  Transparency,
  TreeHead
} from "@session-journal/core"
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import { CheckpointMismatch, InvalidInput, VerificationFailed } from "./Failure.ts"
import * as Input from "./Input.ts"
import { nonNegative, sessionId, validId, withJournal, withoutJournal } from "./internal/commandKit.ts"
import * as Output from "./Output.ts"
import type * as Storage from "./Storage.ts"
import * as Verify from "./Verify.ts"

const MAX_KEY_BYTES = 64 * 1024

const describeError = (e: unknown): string => e instanceof Error ? e.message : String(e)

const readText = (file: string, field: string, maxBytes: number): Effect.Effect<string, InvalidInput> =>
  Effect.tryPromise({
    try: () => Input.readBounded(fs.createReadStream(file), field, maxBytes),
    catch: (e) => new InvalidInput({ field, reason: `cannot read ${file}: ${describeError(e)}` })
  }).pipe(Effect.flatMap(Effect.fromResult))

const fromKeyResult = <A>(field: string, r: Result.Result<A, SignedNote.InvalidKey>) =>
  Result.isSuccess(r) ? Effect.succeed(r.success) : Effect.fail(new InvalidInput({ field, reason: r.failure.message }))

/**
 * Reads a signer key file (`PRIVATE+KEY+…`).
 *
 * @since 0.5.0
 */
export const loadSigner = (file: string): Effect.Effect<SignedNote.Signer, InvalidInput> =>
  Effect.flatMap(readText(file, "--sign", MAX_KEY_BYTES), (text) => fromKeyResult(`--sign ${file}`, SignedNote.parseSigner(text)))

/**
 * The verifier keys of a `--key` value: a verifier key itself, or a file holding one
 * verifier key per line (blank lines and lines starting with `#` skipped).
 *
 * @since 0.5.0
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
    if (out.length === 0) return yield* new InvalidInput({ field: `--key ${value}`, reason: "the file holds no verifier key" })
    return out
  })

// ---------------------------------------------------------------------------
// key generate

const writeKeyFile = (file: string, text: string) =>
  Effect.tryPromise({
    try: async () => {
      // O_EXCL: never replace a key (or follow a link planted where it goes).
      const handle = await fs.promises.open(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600)
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

const generate = Command.make("generate", {
  name: Argument.String("name").pipe(
    Argument.withDescription("Key name, e.g. example.com/journal: it also names the journal in checkpoint origins")
  ),
  out: Flag.String("out").pipe(Flag.withMetavar("FILE"), Flag.withDescription("Where to write the signer key (created 0600, never replaced)"))
}, (a) =>
  withoutJournal(({ json }) =>
    Effect.gen(function*() {
      const signer = yield* fromKeyResult("name", SignedNote.generate(a.name))
      yield* writeKeyFile(a.out, `${SignedNote.encodeSigner(signer)}\n`)
      const vkey = SignedNote.encodeVerifier(signer.verifier)
      if (json) return yield* Output.json({ name: a.name, key_id: SignedNote.keyIdHex(signer.verifier.keyId), verifier: vkey, file: a.out })
      yield* Output.write(`${vkey}\n`)
    }))).pipe(Command.withDescription(
    "Write a new Ed25519 signer key (C2SP signed-note format) to FILE, mode 0600, and print its verifier key"
  ))

/**
 * `key generate NAME --out FILE`.
 *
 * @since 0.5.0
 */
export const key = Command.make("key").pipe(
  Command.withDescription("Signing keys for checkpoints: generate one"),
  Command.withSubcommands([generate])
)

// ---------------------------------------------------------------------------
// checkpoint --sign

/**
 * `checkpoint ID --sign FILE`: verifies the session's stored chain (as `verify` does),
 * then prints the signed checkpoint of the tree over the entries verified. Read-only:
 * it does not write the journal's own checkpoint.
 *
 * @since 0.5.0
 */
export const signCheckpoint = (id: string, keyFile: string, storage: Storage.Options, json: boolean) =>
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

// ---------------------------------------------------------------------------
// verify --checkpoint

/**
 * What `verify --checkpoint` found: the chain's report, the checkpoint's claims, who
 * signed and cosigned it, and how the journal relates to it.
 *
 * @since 0.5.0
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
 * @since 0.5.0
 */
export const verifyCheckpoint = (id: string, file: string, keys: ReadonlyArray<string>, storage: Storage.Options, json: boolean) =>
  Effect.gen(function*() {
    yield* validId(id)
    if (keys.length === 0) return yield* new InvalidInput({ field: "--key", reason: "--checkpoint needs the verifier key of its signer" })
    const verifiers = (yield* Effect.forEach(keys, loadVerifiers)).flat()
    const note = yield* readText(file, "--checkpoint", SignedNote.MAX_NOTE_BYTES)
    const opened = SignedNote.open(note, verifiers)
    if (Result.isFailure(opened)) {
      if (opened.failure.reason === "malformed") return yield* new InvalidInput({ field: `--checkpoint ${file}`, reason: opened.failure.message })
      return yield* new CheckpointMismatch({ id, reason: "signature", detail: opened.failure.message })
    }
    const parsed = TreeHead.parse(opened.success.text)
    if (Result.isFailure(parsed)) return yield* new InvalidInput({ field: `--checkpoint ${file}`, reason: parsed.failure.message })
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
    const finish = (current: { size: number; root: string } | null, problem: CheckpointReport["problem"]) =>
      Effect.gen(function*() {
        const report: CheckpointReport = {
          ...base,
          ok: problem === null,
          current_size: current?.size ?? null,
          current_root: current?.root ?? null,
          problem
        }
        return report
      })
    if (signers.length === 0) {
      return yield* finish(null, { reason: "signature", detail: "only cosignatures verified; no key given signed it as its log" })
    }
    const origin = signers.map((v) => TreeHead.origin(v.verifier.name, id)).find((o) => o === head.origin)
    if (origin === undefined) {
      return yield* finish(null, {
        reason: "other_log",
        detail: `its origin is ${JSON.stringify(head.origin)}, this session's is ${JSON.stringify(TreeHead.origin(signers[0]!.verifier.name, id))}`
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
        return yield* finish({ size: c.currentSize, root: "" }, {
          reason: "cut",
          detail: `the checkpoint covers ${c.size} entries, the journal holds ${c.currentSize}: entries ${c.currentSize}..${c.size - 1} are gone`
        })
      case "replaced":
        return yield* finish(null, {
          reason: "replaced",
          detail: `the tree of its first ${c.size} entries has root ${TreeHead.base64(c.storedRoot)}, the checkpoint says ${
            TreeHead.base64(c.root)
          }: entries it covers were edited or replaced`
        })
      case "other_log":
        return yield* finish(null, { reason: "other_log", detail: `its origin is ${c.origin}, expected ${c.expected}` })
    }
  }).pipe(Effect.flatMap((report) => reportCheckpoint(report, json)))

const reportCheckpoint = (r: CheckpointReport, json: boolean) =>
  Effect.gen(function*() {
    if (json) yield* Output.json({ checkpoint: r })
    else yield* Output.lines(checkpointText(r))
    if (r.problem !== null) return yield* new CheckpointMismatch({ id: r.id, reason: r.problem.reason, detail: r.problem.detail })
  })

/**
 * Human output for a checkpoint report.
 *
 * @since 0.5.0
 */
export const checkpointText = (r: CheckpointReport): Array<string> => [
  r.ok
    ? `${r.id}: consistent with the checkpoint of ${r.tree_size} entries (now ${r.current_size}), signed by ${r.signed_by.join(", ")}`
    : `${r.id}: DOES NOT MATCH the checkpoint of ${r.tree_size} entries (${r.problem?.reason}): ${r.problem?.detail}`,
  `  origin ${r.origin}, root ${r.root}`,
  ...r.cosigned_by.map((c) => `  cosigned by ${c.name} at ${new Date(c.timestamp * 1000).toISOString()}`)
]

/**
 * `verify`'s flags for a checkpoint held elsewhere: `--checkpoint FILE` and `--key VKEY`
 * (repeatable; a verifier key or a file of them).
 *
 * @since 0.5.0
 */
export const verifyFlags = {
  checkpoint: Flag.String("checkpoint").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription("Check the session against this signed checkpoint (needs --key)")
  ),
  key: Flag.String("key").pipe(
    Flag.atLeast(0),
    Flag.withMetavar("VKEY"),
    Flag.withDescription("Verifier key of the checkpoint's signer or a cosigner, or a file of them (repeatable)")
  )
}

/**
 * `checkpoint`'s `--sign FILE`.
 *
 * @since 0.5.0
 */
export const checkpointFlags = {
  sign: Flag.String("sign").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription("Print a signed C2SP checkpoint of the session's tree with this signer key instead (read-only)")
  )
}

/**
 * `verify --checkpoint` for the ids given: exactly one.
 *
 * @since 0.5.0
 */
export const verifyCheckpointOf = (
  ids: ReadonlyArray<string>,
  file: string,
  keys: ReadonlyArray<string>,
  storage: Storage.Options,
  json: boolean
) =>
  ids.length === 1
    ? verifyCheckpoint(ids[0]!, file, keys, storage, json)
    : Effect.fail(new InvalidInput({ field: "id", reason: "--checkpoint checks one session: give its ID" }))

// ---------------------------------------------------------------------------
// prove / consistency

const sizeProblem = (e: Transparency.ScanError): Effect.Effect<never, Transparency.ScanError | InvalidInput> =>
  e._tag === "TreeUnavailable" && e.reason === "size"
    ? Effect.fail(new InvalidInput({ field: "size", reason: e.detail }))
    : Effect.fail(e)

const nodes = (proof: ReadonlyArray<Uint8Array>) => proof.map(TreeHead.base64)

const prove = Command.make("prove", {
  id: sessionId,
  sequence: Argument.Int("sequence").pipe(Argument.withDescription("Sequence of the entry (its leaf index)")),
  size: nonNegative("size").pipe(Flag.optional, Flag.withDescription("Tree size to prove against (default: the current size)"))
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      yield* validId(a.id)
      const p = yield* Transparency.inclusion(a.id, a.sequence, Option.getOrUndefined(a.size)).pipe(Effect.catch(sizeProblem))
      const out = {
        leaf_index: p.leafIndex,
        tree_size: p.treeSize,
        entry_hash: p.entry.entry_hash,
        proof: nodes(p.proof)
      }
      if (json) return yield* Output.json(out)
      yield* Output.lines([
        `entry ${p.leafIndex} (${p.entry.entry_hash}) is in the tree of ${p.treeSize} entries with root ${TreeHead.base64(p.root)}`,
        ...out.proof.map((n, i) => `  ${i} ${n}`)
      ])
    }))).pipe(Command.withDescription(
    "Print the RFC 6962 inclusion proof of an entry: {leaf_index, tree_size, entry_hash, proof} with --json"
  ))

const consistency = Command.make("consistency", {
  id: sessionId,
  old: Argument.Int("old").pipe(Argument.withDescription("Older tree size")),
  new: Argument.Int("new").pipe(Argument.withDescription("Newer tree size"))
}, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      yield* validId(a.id)
      const p = yield* Transparency.consistency(a.id, a.old, a.new).pipe(Effect.catch(sizeProblem))
      const out = { old_size: p.oldSize, new_size: p.newSize, proof: nodes(p.proof) }
      if (json) return yield* Output.json(out)
      yield* Output.lines([
        `the tree of ${p.oldSize} entries (root ${TreeHead.base64(p.oldRoot)}) is a prefix of the tree of ${p.newSize} (root ${
          TreeHead.base64(p.newRoot)
        })`,
        ...out.proof.map((n, i) => `  ${i} ${n}`)
      ])
    }))).pipe(Command.withDescription(
    "Print the RFC 6962 consistency proof between two tree sizes: {old_size, new_size, proof} with --json"
  ))

/**
 * The commands of this module to register at the root.
 *
 * @since 0.5.0
 */
export const commands = [key, prove, consistency] as const
