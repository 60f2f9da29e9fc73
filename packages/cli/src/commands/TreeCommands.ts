/**
 * Heads an outside verifier can hold (core's `Transparency`, docs/DESIGN.md §14):
 * `key generate NAME --out FILE` writes an Ed25519 signer key in the signed-note key
 * format (mode 0600) and prints its verifier key; `checkpoint ID --sign FILE` prints a
 * signed C2SP checkpoint of the session's RFC 6962 tree; `verify ID --checkpoint FILE
 * --key VKEY` checks the signature and that the journal is consistent with that
 * checkpoint; `prove ID SEQUENCE [--size N]` and `consistency ID OLD NEW` print the
 * inclusion and consistency proofs a third party checks with a checkpoint alone;
 * `publish ID --out DIR --sign FILE` writes the session as C2SP tlog-tiles and
 * `verify-remote URL|DIR --key VKEY` checks such a log from its files alone.
 *
 * Everything reads the session without its lock, so it runs next to a writer. The
 * work is in `TreeCheck` and `Publish`, loaded when one of these runs.
 *
 * @since 0.1.0
 */
import { Argument, Command, Flag } from "effect/cli"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidInput } from "../Failure.ts"
import { nonNegative, parseWait, sessionId, withJournal, withoutJournal } from "../internal/commandKit.ts"
import { witnessKeyFlag } from "../internal/publishFlags.ts"
import type * as Storage from "../Storage.ts"
import type * as Publish from "./Publish.ts"
import type * as TreeCheck from "./TreeCheck.ts"

const load = Effect.promise((): Promise<typeof TreeCheck> => import("./TreeCheck.ts"))
const loadPublish = Effect.promise((): Promise<typeof Publish> => import("./Publish.ts"))

const generate = Command.make("generate", {
  name: Argument.String("name").pipe(
    Argument.withDescription("Key name, e.g. example.com/journal: it also names the journal in checkpoint origins")
  ),
  out: Flag.String("out").pipe(
    Flag.withMetavar("FILE"),
    Flag.withDescription("Where to write the signer key (created 0600, never replaced)")
  )
}, (a) => withoutJournal(({ json }) => Effect.flatMap(load, (m) => m.generateKey(a.name, a.out, json)))).pipe(
  Command.withDescription(
    "Write a new Ed25519 signer key (C2SP signed-note format) to FILE, mode 0600, and print its verifier key"
  )
)

/**
 * `key generate NAME --out FILE`.
 *
 * @since 0.1.0
 */
export const key = Command.make("key").pipe(
  Command.withDescription("Signing keys for checkpoints: generate one"),
  Command.withSubcommands([generate])
)

/**
 * `verify`'s flags for a checkpoint held elsewhere: `--checkpoint FILE` and `--key VKEY`
 * (repeatable; a verifier key or a file of them).
 *
 * @since 0.1.0
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
 * @since 0.1.0
 */
export const checkpointFlags = {
  sign: Flag.String("sign").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription(
      "Print a signed C2SP checkpoint of the session's tree with this signer key instead (read-only)"
    )
  )
}

/**
 * `verify --checkpoint` for the ids given: exactly one.
 *
 * @since 0.1.0
 */
export const verifyCheckpointOf = (
  ids: ReadonlyArray<string>,
  file: string,
  keys: ReadonlyArray<string>,
  storage: Storage.Options,
  json: boolean
) =>
  ids.length === 1
    ? Effect.flatMap(load, (m) => m.verifyCheckpoint(ids[0]!, file, keys, storage, json))
    : Effect.fail(new InvalidInput({ field: "id", reason: "--checkpoint checks one session: give its ID" }))

/**
 * `verify --key` without `--checkpoint`: a key checks nothing by itself.
 *
 * @since 0.1.0
 */
export const keyWithoutCheckpoint = Effect.fail(
  new InvalidInput({
    field: "--key",
    reason: "a verifier key is used with --checkpoint FILE, the checkpoint it checks"
  })
)

/**
 * `checkpoint ID --sign FILE` (see `TreeCheck.signCheckpoint`).
 *
 * @since 0.1.0
 */
export const signCheckpoint = (id: string, keyFile: string, storage: Storage.Options, json: boolean) =>
  Effect.flatMap(load, (m) => m.signCheckpoint(id, keyFile, storage, json))

// ---------------------------------------------------------------------------
// prove / consistency

const prove = Command.make(
  "prove",
  {
    id: sessionId,
    sequence: Argument.Int("sequence").pipe(Argument.withDescription("Sequence of the entry (its leaf index)")),
    size: nonNegative("size").pipe(
      Flag.optional,
      Flag.withDescription("Tree size to prove against (default: the current size)")
    )
  },
  (a) =>
    withJournal(
      ({ json }) => Effect.flatMap(load, (m) => m.prove(a.id, a.sequence, Option.getOrUndefined(a.size), json)),
      { readOnly: true }
    )
).pipe(
  Command.withDescription(
    "Print the RFC 6962 inclusion proof of an entry: {leaf_index, tree_size, entry_hash, proof} with --json"
  )
)

const consistency = Command.make(
  "consistency",
  {
    id: sessionId,
    old: Argument.Int("old").pipe(Argument.withDescription("Older tree size")),
    new: Argument.Int("new").pipe(Argument.withDescription("Newer tree size"))
  },
  (a) =>
    withJournal(({ json }) => Effect.flatMap(load, (m) => m.consistency(a.id, a.old, a.new, json)), { readOnly: true })
).pipe(
  Command.withDescription(
    "Print the RFC 6962 consistency proof between two tree sizes: {old_size, new_size, proof} with --json"
  )
)

const witness = Command.make(
  "witness",
  {
    url: Argument.String("url").pipe(
      Argument.withDescription("The witness's submission prefix (add-checkpoint is POSTed under it)")
    ),
    id: sessionId,
    sign: Flag.String("sign").pipe(Flag.withMetavar("FILE"), Flag.withDescription("Signer key of the journal")),
    witnessKey: witnessKeyFlag,
    out: Flag.String("out").pipe(
      Flag.withMetavar("FILE"),
      Flag.withDescription("Where to write the cosigned checkpoint")
    )
  },
  (a) =>
    withJournal(({ json, storage }) =>
      Effect.flatMap(
        load,
        (m) => m.witness(a.url, a.id, { keyFile: a.sign, witnessKeys: a.witnessKey, out: a.out, storage, json })
      )
    )
).pipe(Command.withDescription(
  "Submit the session's signed checkpoint to a C2SP tlog-witness with a consistency proof and write the cosigned checkpoint to FILE"
))

// ---------------------------------------------------------------------------
// publish / verify-remote

const publish = Command.make(
  "publish",
  {
    id: sessionId.pipe(Argument.optional),
    all: Flag.Boolean("all").pipe(
      Flag.withDefault(false),
      Flag.withDescription("Every session of the journal, each into DIR/<id> (instead of one ID)")
    ),
    out: Flag.String("out").pipe(
      Flag.withMetavar("DIR"),
      Flag.withDescription("The directory to write the tiles into (created; a re-run adds what is new)")
    ),
    sign: Flag.String("sign").pipe(Flag.withMetavar("FILE"), Flag.withDescription("Signer key of the journal")),
    hashesOnly: Flag.Boolean("hashes-only").pipe(
      Flag.withDefault(false),
      Flag.withDescription(
        "Publish each entry's hash, not its content: proves every entry's place, shows nothing of it"
      )
    ),
    witness: Flag.String("witness").pipe(
      Flag.atLeast(0),
      Flag.withMetavar("URL"),
      Flag.withDescription(
        "A C2SP tlog-witness to cosign each new checkpoint before it is published (repeatable); a refusal stops the run"
      )
    ),
    witnessKey: witnessKeyFlag,
    every: Flag.String("every").pipe(
      Flag.withMetavar("DURATION"),
      Flag.mapTryCatch(parseWait, (e) => `invalid --every: ${String(e)}`),
      Flag.optional,
      Flag.withDescription("Publish again every DURATION (30s, 5m) until interrupted")
    )
  },
  (a) =>
    withJournal(({ json }) =>
      Effect.gen(function*() {
        const id = Option.getOrUndefined(a.id)
        if ((id === undefined) === !a.all) {
          return yield* new InvalidInput({ field: "publish", reason: "give one session ID or --all" })
        }
        const m = yield* loadPublish
        const options = {
          out: a.out,
          keyFile: a.sign,
          hashesOnly: a.hashesOnly,
          witnesses: a.witness,
          witnessKeys: a.witnessKey,
          everyMillis: Option.getOrUndefined(Option.map(a.every, Duration.toMillis)),
          json
        }
        return yield* id === undefined ? m.publishAll(options) : m.publish(id, options)
      }), { readOnly: true })
).pipe(Command.withDescription(
  "Write the session as C2SP tlog-tiles (a signed checkpoint, tiles, entry bundles) to DIR, for any static host"
))

const verifyRemote = Command.make(
  "verify-remote",
  {
    target: Argument.String("target").pipe(
      Argument.withDescription("The published log: an http(s):// prefix or a directory")
    ),
    key: Flag.String("key").pipe(
      Flag.atLeast(1),
      Flag.withMetavar("VKEY"),
      Flag.withDescription("Verifier key of the log's signer or a cosigner, or a file of them (repeatable)")
    ),
    since: Flag.String("since").pipe(
      Flag.optional,
      Flag.withMetavar("CHECKPOINT"),
      Flag.withDescription("An earlier checkpoint of the log, kept from before: the log must extend it")
    )
  },
  (a) =>
    withoutJournal(({ json }) =>
      Effect.flatMap(
        loadPublish,
        (m) => m.verifyRemote(a.target, { keys: a.key, since: Option.getOrUndefined(a.since), json })
      )
    )
).pipe(Command.withDescription(
  "Check a published log from its files and the signer's verifier key alone: signature, tiles, entries, chain"
))

/**
 * The commands of this module to register at the root.
 *
 * @since 0.1.0
 */
export const commands = [key, prove, consistency, witness, publish, verifyRemote] as const
