/**
 * `node:crypto`'s SHA-256 for the chain. Node's one-shot `crypto.hash` digests the
 * short preimages of entries and folds several times faster than `@noble/hashes`;
 * core checks it reproduces `@noble/hashes` before installing it (`Sha256.layer`).
 * `NodePersistence.layer` installs it; a host using another adapter can provide
 * `NodeSha256.layer` itself.
 *
 * @since 0.1.0
 */
import { Sha256 } from "@session-journal/core"
import type * as Layer from "effect/Layer"
import type * as Crypto from "node:crypto"
import { createRequire } from "node:module"

// `node:crypto` is loaded on the first digest, not with this module: a process that
// opens a session and writes once (a hook) hashes a few entries, and loading the
// module costs more than `@noble/hashes` takes for them.
let hash: typeof Crypto.hash | undefined

/**
 * SHA-256 with `node:crypto`'s one-shot `hash`, as lowercase hex.
 *
 * @since 0.1.0
 */
export const digest: Sha256.HexDigest = (bytes) =>
  (hash ??= (createRequire(import.meta.url)("node:crypto") as typeof Crypto).hash)("sha256", bytes, "hex")

/**
 * Installs `digest` for the process while the layer is alive; fails with
 * `Sha256Mismatch` if it does not reproduce `@noble/hashes`.
 *
 * @since 0.1.0
 */
export const layerStrict: Layer.Layer<never, Sha256.Sha256Mismatch> = Sha256.layer("node:crypto", digest)

/**
 * Like `layerStrict`, but a mismatch leaves `@noble/hashes` in place (with a warning
 * in the log) instead of failing: the faster hash is an optimisation, never a
 * requirement.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<never> = Sha256.layerPreferred("node:crypto", digest)

/**
 * `digest` offered for many digests at once only (`Sha256.layerBulk`): `node:crypto`
 * is loaded, and checked against `@noble/hashes`, the first time a load rebuilds a
 * long session's tree (`Checkpoint.decode`), never for the few entries a hook
 * writes. What the filesystem adapter installs with `nodeSha256: "bulk"`.
 *
 * @since 0.1.0
 */
export const layerBulk: Layer.Layer<never> = Sha256.layerBulk("node:crypto", () => digest)
