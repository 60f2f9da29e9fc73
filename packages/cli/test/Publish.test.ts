/**
 * A session published as C2SP tlog-tiles and checked from the outside: `publish`
 * writes the checkpoint, tiles and bundles (incrementally, hashes only on request),
 * `verify-remote` checks a directory or an HTTP prefix with the verifier key alone and
 * refuses a changed tile hash, a truncated bundle, a rewritten full tile, a checkpoint
 * of another origin, and, with `--since`, a fork between two runs; a publish killed at
 * random points leaves a directory that verifies; and, where Go and Debian's
 * golang-golang-x-mod-dev are installed, Go's `sumdb/tlog` reads the tiles and proves
 * every entry and the consistency with earlier checkpoints.
 */
import { assert, describe, it } from "@effect/vitest"
import { SignedNote } from "@session-journal/core"
import * as Result from "effect/Result"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { afterAll } from "vitest"
import { goProgram, hasGo } from "./GoBuild.ts"
import { cleanup, exited, run, start, tempDir, waitForLine } from "./Run.ts"
import { newKey, record } from "./TreeFixtures.ts"
import { startWitness } from "./WitnessServer.ts"

afterAll(cleanup)

const SEED = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 31))
// A small deterministic generator (mulberry32) for the kill points.
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const message = async (dir: string, id: string, payload: unknown) => {
  const r = await run(["--dir", dir, "append", id, "--payload", JSON.stringify(payload)])
  assert.strictEqual(r.code, 0, r.stderr)
}

const publish = (dir: string, id: string, out: string, keyFile: string, ...more: Array<string>) =>
  run(["--dir", dir, "--json", "publish", id, "--out", out, "--sign", keyFile, ...more])

const verifyRemote = (target: string, vkey: string, ...more: Array<string>) =>
  run(["--json", "verify-remote", target, "--key", vkey, ...more])

const keep = (out: string, name: string) => {
  const file = path.join(path.dirname(out), name)
  fs.copyFileSync(path.join(out, "checkpoint"), file)
  return file
}

const files = (root: string): Array<string> =>
  fs.readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => path.relative(root, path.join(d.parentPath, d.name)))
    .sort()

const serve = async (root: string) => {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url!, "http://x").pathname
    if (url === "/big/checkpoint") {
      res.writeHead(200).end(Buffer.alloc(2 << 20, 97))
      return
    }
    const file = path.join(root, decodeURIComponent(url))
    if (!file.startsWith(root) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end()
      return
    }
    // Entry bundles gzipped without being asked, as tlog-tiles lets a log do.
    const bundle = file.includes(`${path.sep}entries${path.sep}`)
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      ...(bundle ? { "content-encoding": "gzip" } : {})
    })
      .end(bundle ? zlib.gzipSync(fs.readFileSync(file)) : fs.readFileSync(file))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/log`
  return { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

describe("session-journal publish / verify-remote", () => {
  it("publishes a session, adds only what is new on a re-run, and verifies from the directory and over HTTP", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/pub")
    await record(dir, "s", 300)
    await message(dir, "s", { text: "hello", n: [1, 2.5, null] })
    const out = path.join(dir, "site", "log")
    const first = await publish(dir, "s", out, key.file)
    assert.strictEqual(first.code, 0, first.stderr)
    assert.deepInclude(JSON.parse(first.stdout), {
      id: "s",
      origin: "journal.example/pub/s",
      old_size: 0,
      tree_size: 301
    })
    assert.deepStrictEqual(files(out), [
      "checkpoint",
      "tile/0/000",
      "tile/0/001.p/45",
      "tile/1/000.p/1",
      "tile/entries/000",
      "tile/entries/001.p/45"
    ])
    const cp301 = keep(out, "cp301")
    const fullTile = fs.readFileSync(path.join(out, "tile/0/000"))
    const fullStat = fs.statSync(path.join(out, "tile/0/000"))

    const again = await publish(dir, "s", out, key.file)
    assert.deepInclude(JSON.parse(again.stdout), { old_size: 301, tree_size: 301, files_written: 0 })

    await record(dir, "s", 250, "write")
    const second = await publish(dir, "s", out, key.file)
    assert.strictEqual(second.code, 0, second.stderr)
    assert.deepInclude(JSON.parse(second.stdout), { old_size: 301, tree_size: 551 })
    // The full tile is the same file; the partial ones of index 1 gave way to the full one.
    assert.strictEqual(fs.statSync(path.join(out, "tile/0/000")).ino, fullStat.ino)
    assert.deepStrictEqual(fs.readFileSync(path.join(out, "tile/0/000")), fullTile)
    assert.deepStrictEqual(files(out), [
      "checkpoint",
      "tile/0/000",
      "tile/0/001",
      "tile/0/002.p/39",
      "tile/1/000.p/1",
      "tile/1/000.p/2",
      "tile/entries/000",
      "tile/entries/001",
      "tile/entries/002.p/39"
    ])

    const local = await verifyRemote(out, key.vkey, "--since", cp301)
    assert.strictEqual(local.code, 0, local.stderr)
    assert.deepInclude(JSON.parse(local.stdout), { ok: true, id: "s", tree_size: 551, since: 301, hashes_only: 0 })

    const server = await serve(path.join(dir, "site"))
    try {
      const remote = await verifyRemote(server.url, key.vkey, "--since", cp301)
      assert.strictEqual(remote.code, 0, remote.stderr)
      assert.deepInclude(JSON.parse(remote.stdout), { ok: true, tree_size: 551 })
      // An answer over its bound is not read to the end: exit 3, as storage that cannot be read.
      const big = await verifyRemote(server.url.replace(/\/log$/, "/big"), key.vkey)
      assert.strictEqual(big.code, 3, big.stderr)
      assert.include(big.stderr, "more than the 1048576 bytes it may be")
      const nowhere = await verifyRemote(`${server.url}/nothing`, key.vkey)
      assert.strictEqual(nowhere.code, 1)
      assert.include(nowhere.stdout, "there is no checkpoint")
    } finally {
      await server.close()
    }
    const text = await run(["verify-remote", out, "--key", key.vkey])
    assert.match(text.stdout, /the log of s verifies: 551 entries, root \S+, signed by journal\.example\/pub/)
  })

  it("--hashes-only publishes each entry's hash: the log verifies and says what it cannot show", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/private")
    await record(dir, "p", 20)
    const out = path.join(dir, "out")
    const r = await publish(dir, "p", out, key.file, "--hashes-only")
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(fs.statSync(path.join(out, "tile/entries/000.p/20")).size, 20 * 34)
    const v = await run(["verify-remote", out, "--key", key.vkey])
    assert.strictEqual(v.code, 0, v.stderr)
    assert.include(v.stdout, "20 entries published as hashes only: their place is proven, not their content")
  })

  it("refuses a changed tile hash, a truncated bundle, a rewritten full tile, another origin's checkpoint, another key", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/t")
    const otherKey = await newKey(dir, "journal.example/u")
    await record(dir, "a", 260)
    await record(dir, "b", 5, "b-tool")
    const out = path.join(dir, "a-out")
    assert.strictEqual((await publish(dir, "a", out, key.file)).code, 0)
    const bOut = path.join(dir, "b-out")
    assert.strictEqual((await publish(dir, "b", bOut, key.file)).code, 0)
    const pristine = path.join(dir, "pristine")
    fs.cpSync(out, pristine, { recursive: true })
    const tampered = async (change: () => void, reason: string, where: string) => {
      fs.rmSync(out, { recursive: true })
      fs.cpSync(pristine, out, { recursive: true })
      change()
      const r = await verifyRemote(out, key.vkey)
      assert.strictEqual(r.code, 1, `${reason}: ${r.stdout}${r.stderr}`)
      assert.deepInclude(JSON.parse(r.stdout), { ok: false, reason, path: where })
    }
    const at = (f: string) => path.join(out, f)
    await tampered(
      () => {
        const t = fs.readFileSync(at("tile/0/001.p/4"))
        t[40]! ^= 1
        fs.writeFileSync(at("tile/0/001.p/4"), t)
      },
      "tile",
      "tile/0/001.p/4"
    )
    await tampered(
      () => {
        const b = fs.readFileSync(at("tile/entries/000"))
        fs.writeFileSync(at("tile/entries/000"), b.subarray(0, b.length - 3))
      },
      "bundle",
      "tile/entries/000"
    )
    await tampered(
      () => {
        // The full tile written again with the hashes of another history.
        const t = fs.readFileSync(at("tile/0/000"))
        t.copyWithin(0, 32, 64)
        fs.writeFileSync(at("tile/0/000"), t)
      },
      "tile",
      "tile/0/000"
    )
    await tampered(() => fs.copyFileSync(path.join(bOut, "checkpoint"), at("checkpoint")), "root", "checkpoint")
    const otherOut = path.join(dir, "other")
    assert.strictEqual((await publish(dir, "a", otherOut, otherKey.file)).code, 0)
    await tampered(
      () => fs.copyFileSync(path.join(otherOut, "checkpoint"), at("checkpoint")),
      "checkpoint",
      "checkpoint"
    )
    // Another session's checkpoint kept from before: not this log's.
    const r = await verifyRemote(pristine, key.vkey, "--since", path.join(bOut, "checkpoint"))
    assert.strictEqual(r.code, 1)
    assert.deepInclude(JSON.parse(r.stdout), { reason: "since" })
    // A full tile already published is never written again with other bytes.
    fs.rmSync(out, { recursive: true })
    fs.cpSync(pristine, out, { recursive: true })
    const t = fs.readFileSync(at("tile/0/000"))
    t[0]! ^= 1
    fs.writeFileSync(at("tile/0/000"), t)
    fs.rmSync(at("checkpoint"))
    const rewrite = await publish(dir, "a", out, key.file)
    assert.strictEqual(rewrite.code, 1, rewrite.stderr)
    assert.include(rewrite.stderr, "a published full tile or bundle would be rewritten")
    assert.isFalse(fs.existsSync(at("checkpoint")))

    // A log whose size fills its last tile: its last bundle is checked through the full
    // tiles before a re-run continues it (an edited one was taken for the journal's fork).
    await record(dir, "full", 256)
    const fullOut = path.join(dir, "full-out")
    assert.strictEqual((await publish(dir, "full", fullOut, key.file)).code, 0)
    const bundle = path.join(fullOut, "tile/entries/000")
    const b = fs.readFileSync(bundle)
    b[b.length - 1]! ^= 1
    fs.writeFileSync(bundle, b)
    const edited = await publish(dir, "full", fullOut, key.file)
    assert.strictEqual(edited.code, 1, edited.stderr)
    assert.include(edited.stderr, "at tile/entries/000")
  })

  it("--all publishes every session into DIR/<id>, again only what changed; one ID or --all, not both", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/all")
    await record(dir, "a", 3)
    await record(dir, "b", 300)
    const out = path.join(dir, "out")
    const all = () => run(["--dir", dir, "--json", "publish", "--all", "--out", out, "--sign", key.file])
    const first = await all()
    assert.strictEqual(first.code, 0, first.stderr)
    assert.deepStrictEqual(
      (JSON.parse(first.stdout) as Array<{ id: string; tree_size: number }>).map((p) => [p.id, p.tree_size]).sort(),
      [["a", 3], ["b", 300]]
    )
    for (const id of ["a", "b"]) {
      const v = await verifyRemote(path.join(out, id), key.vkey)
      assert.strictEqual(v.code, 0, v.stdout + v.stderr)
    }
    assert.deepStrictEqual(JSON.parse((await all()).stdout), [])
    await message(dir, "a", { text: "one more" })
    const third = await all()
    assert.deepStrictEqual(
      (JSON.parse(third.stdout) as Array<{ id: string; old_size: number; tree_size: number }>).map((p) => [
        p.id,
        p.old_size,
        p.tree_size
      ]),
      [["a", 3, 4]]
    )
    for (const args of [["publish", "a", "--all"], ["publish"]]) {
      const r = await run(["--dir", dir, ...args, "--out", out, "--sign", key.file])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.include(r.stderr, "give one session ID or --all")
    }
  })

  it("a fork between two runs: publish refuses to continue, and verify-remote --since catches a fresh publication", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/f")
    await record(dir, "f", 10)
    const out = path.join(dir, "out")
    assert.strictEqual((await publish(dir, "f", out, key.file)).code, 0)
    const cp10 = keep(out, "cp10")
    // The session rewritten (removed and recorded again), then published over the directory: refused.
    const rewriteAndPublish = async (n: number, tool: string, reason: string) => {
      fs.rmSync(path.join(dir, "f"), { recursive: true })
      await record(dir, "f", n, tool)
      const r = await publish(dir, "f", out, key.file)
      assert.strictEqual(r.code, 1, r.stderr)
      assert.include(r.stderr, reason)
    }
    await rewriteAndPublish(12, "other", "does not extend the published checkpoint of 10 entries")
    // Cut to fewer entries than published, or rewritten at the same length: refused too, not taken for "up to date".
    await rewriteAndPublish(4, "cut", "it holds fewer entries (cut)")
    await rewriteAndPublish(10, "same-length", "its entry 9 is not the published entry 9")
    await rewriteAndPublish(12, "other", "its entry 9 is not the published entry 9")
    // Published afresh elsewhere: it verifies alone, but not against the checkpoint seen before.
    const fresh = path.join(dir, "fresh")
    assert.strictEqual((await publish(dir, "f", fresh, key.file)).code, 0)
    assert.strictEqual((await verifyRemote(fresh, key.vkey)).code, 0)
    const forked = await verifyRemote(fresh, key.vkey, "--since", cp10)
    assert.strictEqual(forked.code, 1)
    assert.deepInclude(JSON.parse(forked.stdout), { ok: false, reason: "since" })
    assert.include(JSON.parse(forked.stdout).detail, "the log forked")
  })

  // Publications killed: 2 in the normal suite (one from nothing, one extending), 12 under STRESS=1.
  const killRounds = process.env["STRESS"] === "1" ? 12 : 2
  it(
    `${killRounds} publishes SIGKILLed at random points leave a directory that verifies, and the next run completes each (seed ${SEED})`,
    async () => {
      const next = random(SEED)
      const dir = tempDir()
      const key = await newKey(dir, "journal.example/k")
      const out = path.join(dir, "out")
      let earlier: string | undefined
      for (let round = 0; round < killRounds; round++) {
        await record(dir, "k", 3000 + Math.floor(next() * 3000), `r${round}`)
        const child = start(["--dir", dir, "publish", "k", "--out", out, "--sign", key.file])
        // Killed after a random share of a run's usual length, or when it ended first.
        const delay = Math.floor(next() * 1500)
        const timer = setTimeout(() => child.kill("SIGKILL"), delay)
        await exited(child)
        clearTimeout(timer)
        if (fs.existsSync(path.join(out, "checkpoint"))) {
          const v = await verifyRemote(out, key.vkey, ...(earlier === undefined ? [] : ["--since", earlier]))
          assert.strictEqual(v.code, 0, `round ${round}, killed after ${delay} ms: ${v.stdout}${v.stderr}`)
        }
        const done = await publish(dir, "k", out, key.file)
        assert.strictEqual(done.code, 0, `round ${round}: ${done.stderr}`)
        const v = await verifyRemote(out, key.vkey, ...(earlier === undefined ? [] : ["--since", earlier]))
        assert.strictEqual(v.code, 0, `round ${round}: ${v.stdout}${v.stderr}`)
        earlier = keep(out, `cp-${round}`)
      }
    },
    process.env["STRESS"] === "1" ? 600_000 : 30_000
  )
})

describe("session-journal publish --witness", () => {
  it("--every: each new checkpoint is cosigned before it is published; after a fork the witness refuses a fresh publication (422), and none goes out", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/w")
    const w = await startWitness(Result.getOrThrow(SignedNote.parseVerifier(key.vkey)))
    try {
      await record(dir, "w", 5)
      const out = path.join(dir, "out")
      const child = start([
        "--dir",
        dir,
        "publish",
        "w",
        "--out",
        out,
        "--sign",
        key.file,
        "--witness",
        w.url,
        "--witness-key",
        w.vkey,
        "--every",
        "100ms"
      ])
      const stderr: Array<Buffer> = []
      child.stderr!.on("data", (b: Buffer) => stderr.push(b))
      await waitForLine(
        child,
        (l) => l.startsWith("w: published 5 entries") && l.includes("cosigned by witness.test/w1")
      )
      const v5 = await verifyRemote(out, key.vkey, "--key", w.vkey)
      assert.strictEqual(v5.code, 0, v5.stderr)
      assert.deepInclude(JSON.parse(v5.stdout), { tree_size: 5 })
      assert.deepStrictEqual(JSON.parse(v5.stdout).cosigned_by.map((c: { name: string }) => c.name), [
        "witness.test/w1"
      ])
      const cp5 = keep(out, "cp5")

      await record(dir, "w", 4, "more")
      await waitForLine(child, (l) => l.startsWith("w: published 9 entries") && l.includes("cosigned by"))
      assert.deepStrictEqual(w.requests.slice(-2).map((r) => [r.old, r.status]), [[0, 409], [5, 200]])

      child.kill("SIGINT")
      assert.strictEqual(await exited(child), 130, Buffer.concat(stderr).toString("utf8"))

      // The session rewritten: the next run refuses to continue the published log.
      fs.rmSync(path.join(dir, "w"), { recursive: true })
      await record(dir, "w", 12, "forked")
      const refused = await publish(dir, "w", out, key.file, "--witness", w.url, "--witness-key", w.vkey)
      assert.strictEqual(refused.code, 1)
      assert.include(refused.stderr, "does not extend the published checkpoint of 9 entries")
      assert.strictEqual((await verifyRemote(out, key.vkey, "--since", cp5)).code, 0)

      // Published afresh elsewhere, the fork is refused by the witness (422) and no checkpoint goes out.
      const fresh = path.join(dir, "fresh")
      const r = await publish(dir, "w", fresh, key.file, "--witness", w.url, "--witness-key", w.vkey)
      assert.strictEqual(r.code, 1, r.stderr)
      assert.match(r.stderr, /did not cosign w \(422\): the journal is not consistent with the tree of 9 entries/)
      assert.isFalse(fs.existsSync(path.join(fresh, "checkpoint")))
    } finally {
      await w.close()
    }
  })
})

// ---------------------------------------------------------------------------
// Go's sumdb/tlog reading the tiles, when installed (Debian: golang-go, golang-golang-x-mod-dev).

const tilecheck = (): string => goProgram("tilecheck")

describe.skipIf(!hasGo)("independent check with Go's sumdb/tlog", () => {
  it("reads our tiles, proves every entry and the consistency with earlier checkpoints; refuses tampered tiles", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/go")
    const out = path.join(dir, "out")
    const kept: Array<string> = []
    for (const [n, extra] of [[1, []], [255, []], [300, ["--hashes-only"]], [70, []]] as const) {
      await record(dir, "g", n, `t${n}`)
      await message(dir, "g", { n })
      const r = await publish(dir, "g", out, key.file, ...extra)
      assert.strictEqual(r.code, 0, r.stderr)
      kept.push(keep(out, `cp-${kept.length}`))
    }
    const ok = spawnSync(tilecheck(), [out, key.vkey, ...kept], { encoding: "utf8" })
    assert.strictEqual(ok.status, 0, ok.stderr)
    assert.include(ok.stdout, "inclusion 630 ok")
    for (const size of [2, 258, 559]) assert.include(ok.stdout, `consistency ${size} 630 ok`)

    const tile = path.join(out, "tile/0/001")
    const bytes = fs.readFileSync(tile)
    bytes[100]! ^= 1
    fs.writeFileSync(tile, bytes)
    const bad = spawnSync(tilecheck(), [out, key.vkey], { encoding: "utf8" })
    assert.strictEqual(bad.status, 1)
    assert.match(bad.stderr, /inconsistent tile|invalid transparency proof/)
    const ours = await verifyRemote(out, key.vkey)
    assert.deepInclude(JSON.parse(ours.stdout), { ok: false, reason: "tile", path: "tile/0/001" })
  })
})
