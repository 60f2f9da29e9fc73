/**
 * `node:crypto`'s SHA-256 for the chain, installed by the adapter's layers as the
 * filesystem adapter installs it (`NodeSha256` in `@session-journal/node`, which
 * this package does not depend on): `crypto.hash` digests the short preimages of
 * entries and folds several times faster than `@noble/hashes`, and core checks that
 * it reproduces them before installing it.
 */
import { Sha256 } from "@session-journal/core"
import type * as Layer from "effect/Layer"
import { hash } from "node:crypto"

/** Installs `node:crypto`'s SHA-256 while the layer is alive (`Sha256.layerPreferred`). */
export const layer: Layer.Layer<never> = Sha256.layerPreferred("node:crypto", (bytes) => hash("sha256", bytes, "hex"))
