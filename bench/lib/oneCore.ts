/**
 * The scenarios import core's sources; the packages they use (node, postgres, ai)
 * must resolve to the same sources (the `@session-journal/source` condition), or the
 * process holds two copies of core and the SHA-256 the node package installs goes
 * to the copy the service does not use. Exits when that is the case.
 */
import * as Effect from "effect/Effect"
import { Sha256 } from "../../packages/core/src/index.ts"
import { NodeSha256 } from "../../packages/node/src/index.ts"

export const requireOneCore = (script: string): void => {
  if (Effect.runSync(Effect.provide(Effect.sync(Sha256.implementation), NodeSha256.layer)) !== "node:crypto") {
    process.stderr.write(
      `${script} loaded two copies of core: run it with --conditions=@session-journal/source (pnpm bench does)\n`
    )
    process.exit(2)
  }
}
