/**
 * What `publish` and `verify-remote` do (docs/DESIGN.md §14), loaded only when one of
 * them runs: a session written out as C2SP tlog-tiles for anyone to host, and such a
 * directory or URL checked with the signer's public key alone (core's `TiledLog`).
 *
 * Publishing is crash-safe file by file (`writeFile`: a temporary file in the same
 * directory, written, fsynced, renamed over, the directory fsynced) and in order: the
 * bundles and tiles first, the signed `checkpoint` last, so a reader of the directory
 * at any moment sees the older checkpoint with every file it needs, or the new one
 * with every file it needs. A full tile or bundle is written once: found again with
 * other bytes, the run stops. A partial one is written beside the older partial ones
 * of its index (readers holding an older checkpoint still find theirs); once the full
 * one is there and the checkpoint names it, the partial ones of that index are
 * removed. A re-run reads the published checkpoint, the partial tiles and bundle of its
 * size (checked against its root), and from the journal only the entries after it.
 *
 * @since 0.1.0
 */
import {
  Chain,
  Entry,
  Merkle,
  Persistence,
  SignedNote,
  TiledLog,
  Tiles,
  Transparency,
  TreeHead
} from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { NodeSha256 } from "@session-journal/node"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { InvalidInput, NotAvailable } from "../Failure.ts"
import { validId } from "../internal/commandKit.ts"
import * as PublicFile from "../internal/publicFile.ts"
import * as Output from "../Output.ts"
import { cosign, loadSigner, loadVerifiers, loadWitnessKeys } from "./TreeCheck.ts"

// ---------------------------------------------------------------------------
// Files

const failed = (what: string, file: string, e: unknown) =>
  new NotAvailable({ feature: "publish", reason: `cannot ${what} ${file}: ${messageOf(e)}` })

/**
 * `PublicFile.write` (crash-safe, 0644) as an Effect.
 *
 * @since 0.1.0
 */
export const writeFile = (file: string, bytes: Uint8Array) =>
  Effect.flatMap(
    Random.Random,
    (random) =>
      Effect.tryPromise({ try: () => PublicFile.write(file, bytes, random), catch: (e) => failed("write", file, e) })
  )

/**
 * The bytes of `file`, or `undefined` when there is none; more than `maxBytes` is a
 * failure, found before reading.
 *
 * @since 0.1.0
 */
export const readFile = (file: string, maxBytes: number) =>
  Effect.tryPromise({ try: () => PublicFile.read(file, maxBytes), catch: (e) => failed("read", file, e) })

// ---------------------------------------------------------------------------
// publish

/**
 * What one publishing run did.
 *
 * @since 0.1.0
 */
export interface Published {
  readonly id: string
  readonly origin: string
  readonly old_size: number
  readonly tree_size: number
  readonly root: string
  readonly files_written: number
  readonly cosigned_by: ReadonlyArray<{ readonly name: string; readonly timestamp: number }>
}

const refused = (reason: Tiles.TilesRefused["reason"], file: string, detail: string) =>
  new Tiles.TilesRefused({ reason, path: file, detail })

/**
 * What a publishing run is given: the directory, the signer key file, whether entries
 * go out as hashes only, and the witnesses (URLs and their verifier keys).
 *
 * @since 0.1.0
 */
export interface PublishOptions {
  readonly out: string
  readonly keyFile: string
  readonly hashesOnly: boolean
  readonly witnesses: ReadonlyArray<string>
  readonly witnessKeys: ReadonlyArray<string>
}

// The published state a run continues from: the checkpoint, its partial tiles and bundle.
const resume = (out: string, signer: SignedNote.Signer, origin: string) =>
  Effect.gen(function*() {
    const noteBytes = yield* readFile(path.join(out, "checkpoint"), SignedNote.MAX_NOTE_BYTES)
    if (noteBytes === undefined) {
      return { size: 0, partials: [], pending: [], last: Entry.ZERO_HASH }
    }
    const note = new TextDecoder().decode(noteBytes)
    const { head } = yield* Effect.fromResult(TiledLog.openCheckpoint(note, [signer.verifier], "checkpoint"))
    if (head.origin !== origin) {
      return yield* refused("checkpoint", "checkpoint", `the directory holds the log of ${head.origin}, not ${origin}`)
    }
    const partials: Array<Uint8Array> = []
    for (const tile of Tiles.partialTiles(head.size)) {
      if (tile.width === 0) {
        partials.push(new Uint8Array(0))
        continue
      }
      const file = Tiles.tilePath(tile)
      const bytes = yield* readFile(path.join(out, file), Tiles.FULL_TILE_BYTES)
      if (bytes?.length !== tile.width * Merkle.HASH_BYTES) {
        return yield* refused("tile", file, "the tile the published checkpoint needs is missing or of another length")
      }
      partials.push(bytes)
    }
    const range = Tiles.rangeOf(Tiles.partialTiles(head.size).map((tile, l) => ({ tile, hashes: partials[l]! })))
    if (!Merkle.equals(Merkle.root(range), head.root)) {
      return yield* refused("root", "checkpoint", "the published partial tiles do not give its root")
    }
    // The entries of the partial bundle (they must be the level-0 tile's leaves), and
    // the last entry's hash, which the next entry must link to.
    const width = head.size % Tiles.TILE_WIDTH
    const index = Math.floor((head.size - 1) / Tiles.TILE_WIDTH)
    let pending: ReadonlyArray<Uint8Array> = []
    let last = Entry.ZERO_HASH
    if (head.size > 0) {
      const file = Tiles.bundlePath(index, width === 0 ? Tiles.TILE_WIDTH : width)
      const bytes = yield* readFile(path.join(out, file), Tiles.MAX_BUNDLE_BYTES)
      if (bytes === undefined) {
        return yield* refused("bundle", file, "the bundle the published checkpoint needs is missing")
      }
      const entries = yield* Effect.fromResult(Tiles.decodeBundle(bytes, width === 0 ? Tiles.TILE_WIDTH : width, file))
      const read = yield* Effect.forEach(entries, (e, i) => Effect.fromResult(Tiles.readEntry(e, file, i)))
      const h = Merkle.HASH_BYTES
      if (width > 0) {
        for (let i = 0; i < read.length; i++) {
          const leaf = Merkle.entryLeafHash(read[i]!.entryHash)
          if (!Merkle.equals(leaf, partials[0]!.subarray(i * h, (i + 1) * h))) {
            return yield* refused("bundle", file, `entry ${i} is not the leaf of the published tile`)
          }
        }
        pending = entries
      } else {
        // The size fills its last level-0 tile: that full tile, and the full ones above it
        // up to the lowest partial tile, each hash to the last hash of the tile above.
        const top = partials.findIndex((p) => p.length > 0)
        let expected = partials[top]!.subarray(partials[top]!.length - h)
        for (let l = top - 1; l >= 0; l--) {
          const tile = { level: l, index: Math.floor((head.size - 1) / Tiles.TILE_WIDTH ** (l + 1)), width: 256 }
          const tileFile = Tiles.tilePath(tile)
          const hashes = yield* readFile(path.join(out, tileFile), Tiles.FULL_TILE_BYTES)
          if (hashes?.length !== Tiles.FULL_TILE_BYTES || !Merkle.equals(Tiles.fullRoot(hashes), expected)) {
            return yield* refused("tile", tileFile, "the full tile is missing or not the one the checkpoint covers")
          }
          expected = hashes.subarray(Tiles.FULL_TILE_BYTES - h)
        }
        if (!Merkle.equals(Merkle.entryLeafHash(read.at(-1)!.entryHash), expected)) {
          return yield* refused("bundle", file, "its last entry is not the leaf of the published tile")
        }
      }
      last = read.at(-1)!.entryHash
    }
    return { size: head.size, partials, pending, last }
  })

/**
 * `publish ID --out DIR --sign KEYFILE [--hashes-only]`: one run (see the module header).
 *
 * @since 0.1.0
 */
export const publishOnce = (id: string, options: PublishOptions) =>
  Effect.gen(function*() {
    yield* validId(id)
    const signer = yield* loadSigner(options.keyFile)
    const witnessVerifiers = options.witnesses.length === 0 ? [] : yield* loadWitnessKeys(options.witnessKeys)
    const origin = TreeHead.origin(signer.verifier.name, id)
    const out = options.out
    const from = yield* resume(out, signer, origin)
    const writer = Tiles.writer(options.hashesOnly ? "hashes" : "entries", from.size, from.partials, from.pending)
    const persistence = yield* Persistence.Persistence
    let written = 0
    const wrote: Array<string> = []
    const put = (file: Tiles.File) =>
      Effect.gen(function*() {
        const target = path.join(out, file.path)
        if (file.full) {
          const existing = yield* readFile(target, Tiles.MAX_BUNDLE_BYTES)
          if (existing !== undefined) {
            if (existing.length === file.bytes.length && Merkle.equals(existing, file.bytes)) return
            return yield* refused("tile", file.path, "a published full tile or bundle would be rewritten")
          }
          wrote.push(file.path)
        }
        yield* writeFile(target, file.bytes)
        written++
      })
    let prev = from.last
    // The journal is read from the last published entry, which must still be there
    // with its hash: a journal cut or rewritten since is refused, not published over.
    let seenLast = from.size === 0
    const forked = (detail: string) =>
      refused(
        "since",
        "journal",
        `the journal does not extend the published checkpoint of ${from.size} entries: ${detail}`
      )
    yield* persistence.history(id, { from: Math.max(0, from.size - 1) }).pipe(
      Stream.runForEach((entry) =>
        Effect.gen(function*() {
          if (!seenLast) {
            seenLast = true
            if (entry.sequence !== from.size - 1 || entry.entry_hash !== from.last) {
              return yield* forked(`its entry ${entry.sequence} is not the published entry ${from.size - 1}`)
            }
            return
          }
          const index = writer.size()
          if (entry.sequence !== index) {
            return yield* refused(
              "chain",
              "journal",
              index === 0
                ? `the history starts at sequence ${entry.sequence}: earlier entries were removed`
                : `sequence ${entry.sequence} follows ${index - 1}`
            )
          }
          const chained = Chain.verify([entry], { prefixEvicted: false, previousHash: prev, indexOffset: index })
          if (Result.isFailure(chained)) return yield* refused("chain", "journal", chained.failure.message)
          prev = entry.entry_hash
          writer.push(entry)
          for (const file of writer.full()) yield* put(file)
        })
      )
    )
    if (!seenLast) return yield* forked(`it holds fewer entries (cut)`)
    const size = writer.size()
    const range = writer.range()
    const cosignedBy: Array<{ readonly name: string; readonly timestamp: number }> = []
    if (size > from.size || from.size === 0) {
      for (const file of writer.partials()) yield* put(file)
      const head = TreeHead.make(origin, range)
      let note = yield* Effect.fromResult(SignedNote.sign(TreeHead.text(head), [signer])).pipe(Effect.orDie)
      // Each witness cosigns before the checkpoint is published; one that refuses (a
      // fork, a cut) stops the run with the older checkpoint in place. One that cannot
      // be reached is reported, and the checkpoint goes out without its cosignature.
      for (const url of options.witnesses) {
        const c = yield* cosign(
          url,
          id,
          { head, note },
          witnessVerifiers,
          (oldSize) => Effect.map(Transparency.consistency(id, oldSize, size), (p) => p.proof)
        ).pipe(
          Effect.catchTag("NotAvailable", (e) =>
            Effect.as(
              Output.errorLine(`session-journal: ${e.message}; the checkpoint is published without its cosignature`),
              undefined
            ))
        )
        if (c !== undefined) {
          note = c.note
          cosignedBy.push(...c.cosignedBy)
        }
      }
      yield* writeFile(path.join(out, "checkpoint"), new TextEncoder().encode(note))
      written++
      // The checkpoint names the full files now: the partial ones of their index go.
      for (const file of wrote) {
        yield* Effect.tryPromise({
          try: () => fs.promises.rm(path.join(out, `${file}.p`), { recursive: true, force: true }),
          catch: (e) => failed("remove", `${file}.p`, e)
        })
      }
    }
    return {
      id,
      origin,
      old_size: from.size,
      tree_size: size,
      root: TreeHead.base64(Merkle.root(range)),
      files_written: written,
      cosigned_by: cosignedBy
    } satisfies Published
  })

// `once`, then again every `everyMillis` until interrupted (a failure ends it); once alone without.
const repeated = <E, R>(once: Effect.Effect<void, E, R>, everyMillis: number | undefined) =>
  everyMillis === undefined ? once : Effect.forever(Effect.andThen(once, Effect.sleep(Duration.millis(everyMillis))))

// The lines saying what a run over every session published, each into DIR/<id>.
const publishedLines = (done: ReadonlyArray<Published>, out: string) =>
  Output.lines(done.map((p) => publishedText(p, path.join(out, p.id))))

const publishedText = (p: Published, out: string): string =>
  p.tree_size === p.old_size && p.files_written === 0
    ? `${p.id}: ${out} is up to date (${Output.count(p.tree_size, "entry", "entries")}, root ${p.root})`
    : `${p.id}: published ${Output.count(p.tree_size, "entry", "entries")} to ${out} (${
      p.tree_size - p.old_size
    } new, ${p.files_written} files written), root ${p.root}${
      p.cosigned_by.length === 0 ? "" : `, cosigned by ${p.cosigned_by.map((c) => c.name).join(", ")}`
    }`

/**
 * `publish ID --out DIR --sign KEYFILE [--hashes-only] [--witness URL --witness-key
 * VKEY] [--every DURATION]`: one run, or a run every DURATION until interrupted (a
 * failed run, a witness's refusal included, ends it).
 *
 * @since 0.1.0
 */
export const publish = (
  id: string,
  options: PublishOptions & { readonly everyMillis: number | undefined; readonly json: boolean }
) => {
  const once = Effect.flatMap(
    publishOnce(id, options),
    (p) => options.json ? Output.json(p) : Output.lines([publishedText(p, options.out)])
  )
  return repeated(once, options.everyMillis)
}

/**
 * What `publishAll` is given: a run's options, with `out` the directory that holds one
 * directory per session (`DIR/<id>`).
 *
 * @since 0.1.0
 */
export type PublishAllOptions = PublishOptions

/**
 * Whether a failed run says the journal or what was published is not what it claims: a
 * journal that no longer extends the published checkpoint (cut, rewritten, forked), a
 * published file that would be rewritten, a witness that refuses to cosign.
 *
 * @since 0.1.0
 */
export const isRefusal = (e: { readonly _tag: string }): boolean =>
  e._tag === "TilesRefused" || e._tag === "WitnessRefused"

/**
 * One run over every session of the journal: each session whose number of entries
 * differs from `published` (what the previous runs of the caller published, updated
 * here) is published into `DIR/<id>`. A session that fails otherwise than by a refusal
 * is reported on stderr, counted in `failed` and left for the next run; a refusal ends
 * the run with it.
 *
 * @since 0.1.0
 */
export const publishChanged = (options: PublishAllOptions, published: Map<string, number>) =>
  Effect.gen(function*() {
    const persistence = yield* Persistence.Persistence
    const sessions = yield* persistence.list
    const done: Array<Published> = []
    let failed = 0
    for (const session of sessions) {
      if (published.get(session.id) === session.entries) continue
      const p = yield* publishOnce(session.id, { ...options, out: path.join(options.out, session.id) }).pipe(
        Effect.catch((e) =>
          isRefusal(e)
            ? Effect.fail(e)
            : Effect.as(
              Effect.andThen(
                Effect.sync(() => failed++),
                Output.errorLine(`session-journal: publishing ${session.id} failed: ${e.message}`)
              ),
              undefined
            )
        )
      )
      if (p === undefined) continue
      published.set(session.id, p.tree_size)
      if (p.tree_size !== p.old_size || p.files_written > 0) done.push(p)
    }
    return { done, failed }
  })

/**
 * `publish --all --out DIR …`: every session of the journal into `DIR/<id>`, once or
 * every `everyMillis` until interrupted. A run ends the command when a session is
 * refused, or, after the others were published, when one could not be.
 *
 * @since 0.1.0
 */
export const publishAll = (
  options: PublishAllOptions & { readonly everyMillis: number | undefined; readonly json: boolean }
) => {
  const published = new Map<string, number>()
  const once = Effect.flatMap(publishChanged(options, published), ({ done, failed }) =>
    Effect.andThen(
      options.json
        ? Output.json(done)
        : publishedLines(done, options.out),
      failed === 0
        ? Effect.void
        : Effect.fail(
          new NotAvailable({
            feature: "publish",
            reason: `${Output.count(failed, "session", "sessions")} could not be published (above)`
          })
        )
    ))
  return repeated(once, options.everyMillis)
}

/**
 * Publishing beside a door that writes the journal (the resident guard, the MCP
 * gateway): `door` runs, and beside it every session that changed is published every
 * `everyMillis`, each session published said in a line; once the door ends, one
 * last run publishes what it wrote since. Only a refusal (`isRefusal`: a fork, a cut,
 * a witness's refusal) ends the door early, failing with it, so the door stops as
 * loudly as a failed verification; every other failure is reported and tried again.
 *
 * @since 0.1.0
 */
export const publishAround = <A, E, R>(
  door: Effect.Effect<A, E, R>,
  options: PublishAllOptions & { readonly everyMillis: number }
) =>
  Effect.gen(function*() {
    const published = new Map<string, number>()
    const once = publishChanged(options, published).pipe(
      Effect.flatMap(({ done }) => publishedLines(done, options.out)),
      Effect.catch((e) =>
        isRefusal(e)
          ? Effect.fail(e)
          : Output.errorLine(`session-journal: publishing failed, tried again next run: ${e.message}`)
      )
    )
    const result = yield* Effect.raceFirst(
      door,
      repeated(once, options.everyMillis)
    )
    yield* once
    return result
  })

// ---------------------------------------------------------------------------
// verify-remote

const MAX_TOTAL_MILLIS = 5 * 60_000

// One GET under a deadline shared by the whole verification, the body bounded (after
// decompression: a static host may gzip without being asked, as tlog-tiles allows).
const get = (url: string, maxBytes: number, signal: AbortSignal) =>
  new Promise<Uint8Array | undefined>((resolve, reject) => {
    const client = url.startsWith("https:") ? https : http
    const request = client.get(url, { signal, headers: { "accept-encoding": "gzip, identity" } }, (response) => {
      const status = response.statusCode ?? 0
      if (status === 404 || status === 410) {
        response.resume()
        return resolve(undefined)
      }
      if (status !== 200) {
        response.resume()
        return reject(new Error(`${url} answered ${status}`))
      }
      const encoding = response.headers["content-encoding"] ?? "identity"
      if (encoding !== "identity" && encoding !== "gzip") {
        response.destroy()
        return reject(new Error(`${url} came with content-encoding ${encoding}`))
      }
      const body = encoding === "gzip" ? response.pipe(zlib.createGunzip()) : response
      const chunks: Array<Buffer> = []
      let total = 0
      body.on("data", (chunk: Buffer) => {
        total += chunk.length
        if (total > maxBytes) {
          response.destroy()
          body.destroy()
          reject(new Error(`${url} is more than the ${maxBytes} bytes it may be`))
        } else chunks.push(chunk)
      })
      body.on("end", () => resolve(new Uint8Array(Buffer.concat(chunks))))
      body.on("error", reject)
      response.on("error", reject)
    })
    request.on("error", reject)
  })

/**
 * The reader of a published log at `target`: an `http(s)://` prefix (GET, 404 for a
 * file that is not there, all requests under one deadline of `MAX_TOTAL_MILLIS`) or a
 * directory.
 *
 * @since 0.1.0
 */
export const reader = (target: string): TiledLog.Read<NotAvailable> => {
  if (/^https?:\/\//.test(target)) {
    const base = target.replace(/\/+$/, "")
    const signal = AbortSignal.timeout(MAX_TOTAL_MILLIS)
    return (file, maxBytes) =>
      Effect.tryPromise({
        try: () => get(`${base}/${file}`, maxBytes, signal),
        catch: (e) => new NotAvailable({ feature: "verify-remote", reason: `${base}/${file}: ${messageOf(e)}` })
      })
  }
  return (file, maxBytes) =>
    readFile(path.join(target, file), maxBytes).pipe(
      Effect.mapError((e) => new NotAvailable({ feature: "verify-remote", reason: e.reason }))
    )
}

/**
 * `verify-remote URL|DIR --key VKEY [--since CHECKPOINT]`: exit 0 when the published
 * log verifies, 1 (`TilesRefused`) when it does not, 3 when it cannot be read.
 *
 * @since 0.1.0
 */
export const verifyRemote = (
  target: string,
  options: { readonly keys: ReadonlyArray<string>; readonly since: string | undefined; readonly json: boolean }
) =>
  Effect.gen(function*() {
    if (options.keys.length === 0) {
      return yield* new InvalidInput({ field: "--key", reason: "the verifier key of the log's signer is needed" })
    }
    const verifiers = (yield* Effect.forEach(options.keys, loadVerifiers)).flat()
    let since: string | undefined
    if (options.since !== undefined) {
      const bytes = yield* readFile(options.since, SignedNote.MAX_NOTE_BYTES).pipe(
        Effect.mapError((e) => new InvalidInput({ field: "--since", reason: e.reason }))
      )
      if (bytes === undefined) {
        return yield* new InvalidInput({ field: "--since", reason: `there is no file ${options.since}` })
      }
      since = new TextDecoder().decode(bytes)
    }
    // node:crypto's SHA-256 for the entries' preimages (checked against @noble/hashes first).
    const result = yield* Effect.result(TiledLog.verify(reader(target), { verifiers, since })).pipe(
      Effect.provide(NodeSha256.layer)
    )
    if (Result.isFailure(result)) {
      const e = result.failure
      if (e._tag === "TilesRefused") {
        if (options.json) yield* Output.json({ ok: false, target, reason: e.reason, path: e.path, detail: e.detail })
        else yield* Output.lines([`${target}: REFUSED (${e.reason}) at ${e.path}: ${e.detail}`])
      }
      return yield* e
    }
    const v = result.success
    if (options.json) {
      return yield* Output.json({
        ok: true,
        target,
        id: v.id,
        origin: v.origin,
        tree_size: v.size,
        root: TreeHead.base64(v.root),
        signed_by: v.signedBy,
        cosigned_by: v.cosignedBy,
        hashes_only: v.hashesOnly,
        since: v.since ?? null
      })
    }
    yield* Output.lines([
      `${target}: the log of ${v.id} verifies: ${Output.count(v.size, "entry", "entries")}, root ${
        TreeHead.base64(v.root)
      }, signed by ${v.signedBy.join(", ")}${v.since === undefined ? "" : `; it extends the checkpoint of ${v.since}`}`,
      ...(v.hashesOnly > 0
        ? [
          `  ${
            Output.count(v.hashesOnly, "entry", "entries")
          } published as hashes only: their place is proven, not their content`
        ]
        : []),
      ...v.cosignedBy.map((c) => `  cosigned by ${c.name} at ${new Date(c.timestamp * 1000).toISOString()}`)
    ])
  })
