/**
 * The flags of publishing beside a door that writes the journal (`claude-code guard`,
 * `mcp proxy`): `--publish DIR --sign FILE [--witness URL --witness-key VKEY]…
 * [--publish-every DURATION]`, and the options of `Publish.publishAround` they make.
 */
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Flag } from "effect/cli"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Publish from "../commands/Publish.ts"
import { InvalidInput } from "../Failure.ts"
import { parseWait } from "./commandKit.ts"

/** How often a door publishes when `--publish-every` is not given. */
export const DEFAULT_EVERY = Duration.minutes(1)

/** `--witness-key VKEY` (repeatable), as `witness` and `publish` take it. */
export const witnessKeyFlag = Flag.String("witness-key").pipe(
  Flag.atLeast(0),
  Flag.withMetavar("VKEY"),
  Flag.withDescription(
    "Verifier key of the witness (type 0x04), or a file of them; cosignatures by other keys are dropped"
  )
)

/** The flags, to spread into a command's flags. */
export const flags = {
  publish: Flag.String("publish").pipe(
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription(
      "Publish every session this process writes as C2SP tlog-tiles into DIR/<id> (as `publish --all`), " +
        "with --sign; a fork or a witness's refusal stops the process with exit 1"
    )
  ),
  sign: Flag.String("sign").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription("Signer key of the published checkpoints (with --publish)")
  ),
  witness: Flag.String("witness").pipe(
    Flag.atLeast(0),
    Flag.withMetavar("URL"),
    Flag.withDescription("A C2SP tlog-witness to cosign each new published checkpoint (repeatable, with --publish)")
  ),
  witnessKey: witnessKeyFlag,
  publishEvery: Flag.String("publish-every").pipe(
    Flag.mapTryCatch(parseWait, (e) => `invalid --publish-every: ${messageOf(e)}`),
    Flag.optional,
    Flag.withMetavar("DURATION"),
    Flag.withDescription(`How often to publish (default ${Duration.format(DEFAULT_EVERY)}; with --publish)`)
  )
}

/** What the flags parsed to. */
export interface Parsed {
  readonly publish: Option.Option<string>
  readonly sign: Option.Option<string>
  readonly witness: ReadonlyArray<string>
  readonly witnessKey: ReadonlyArray<string>
  readonly publishEvery: Option.Option<Duration.Duration>
}

/** The options of `Publish.publishAround`, or undefined without `--publish`; the flags checked together. */
export const optionsOf = (
  a: Parsed
): Effect.Effect<Parameters<typeof Publish.publishAround>[1] | undefined, InvalidInput> =>
  Effect.gen(function*() {
    const out = Option.getOrUndefined(a.publish)
    if (out === undefined) {
      const stray = Option.isSome(a.sign) ?
        "--sign" :
        a.witness.length > 0 ?
        "--witness" :
        Option.isSome(a.publishEvery) ?
        "--publish-every" :
        undefined
      if (stray !== undefined) return yield* new InvalidInput({ field: stray, reason: "only with --publish DIR" })
      return undefined
    }
    const keyFile = Option.getOrUndefined(a.sign)
    if (keyFile === undefined) {
      return yield* new InvalidInput({ field: "--publish", reason: "needs --sign FILE, the signer key" })
    }
    return {
      out,
      keyFile,
      hashesOnly: false,
      witnesses: a.witness,
      witnessKeys: a.witnessKey,
      everyMillis: Duration.toMillis(Option.getOrElse(a.publishEvery, () => DEFAULT_EVERY))
    }
  })
