/**
 * Heads an outside verifier holds, through the real binary on a temporary journal
 * directory: `key generate` (0600, never replacing a file, the verifier key printed),
 * `checkpoint --sign` (a C2SP checkpoint of the RFC 6962 tree), `verify --checkpoint`
 * (consistent after more appends; a cut tail, a replaced session, an edited entry,
 * another key, another session's checkpoint all exit 1 saying which), and `prove` /
 * `consistency`, whose proofs verify with the checkpoint alone — with core's `Merkle`
 * and, where Go and Debian's golang-golang-x-mod-dev are installed, with Go's
 * `sumdb/note` and `sumdb/tlog`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Merkle, SignedNote, TreeHead } from "@session-journal/core"
import * as Result from "effect/Result"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { goProgram, hasGo } from "./GoBuild.ts"
import { cleanup, run, tempDir } from "./Run.ts"
import { newKey, record } from "./TreeFixtures.ts"

afterAll(cleanup)

const lines = (s: string) => s.split("\n").filter((l) => l.length > 0)

const sign = async (dir: string, id: string, keyFile: string) => {
  const r = await run(["--dir", dir, "checkpoint", id, "--sign", keyFile])
  assert.strictEqual(r.code, 0, r.stderr)
  const file = path.join(dir, `${id}-${Math.random().toString(36).slice(2)}.checkpoint`)
  fs.writeFileSync(file, r.stdout)
  return { file, note: r.stdout }
}

const verify = (dir: string, id: string, checkpoint: string, ...keys: Array<string>) =>
  run(["--dir", dir, "--json", "verify", id, "--checkpoint", checkpoint, ...keys.flatMap((k) => ["--key", k])])

const segmentOf = (dir: string, id: string) => {
  const name = fs.readdirSync(path.join(dir, id)).find((f) => f.endsWith(".jsonl"))!
  return path.join(dir, id, name)
}

describe("session-journal key generate", () => {
  it("writes the signer key 0600, prints its verifier key, and never replaces a file", async () => {
    const dir = tempDir()
    const file = path.join(dir, "k")
    const r = await run(["key", "generate", "journal.example/a", "--out", file])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
    const signer = SignedNote.parseSigner(fs.readFileSync(file, "utf8"))
    assert.isTrue(Result.isSuccess(signer))
    if (Result.isSuccess(signer)) {
      assert.strictEqual(r.stdout, `${SignedNote.encodeVerifier(signer.success.verifier)}\n`)
    }
    assert.match(r.stdout, /^journal\.example\/a\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}\n$/)
    const before = fs.readFileSync(file, "utf8")
    const again = await run(["key", "generate", "journal.example/a", "--out", file])
    assert.strictEqual(again.code, 2)
    assert.match(again.stderr, /EEXIST/)
    assert.strictEqual(fs.readFileSync(file, "utf8"), before)
    const badName = await run(["key", "generate", "has+plus", "--out", path.join(dir, "k2")])
    assert.strictEqual(badName.code, 2)
    assert.isFalse(fs.existsSync(path.join(dir, "k2")))
  })
})

describe("session-journal checkpoint --sign / verify --checkpoint", () => {
  it("refuses a signer key its group or others may read, naming the file and chmod 600, as a token file", async () => {
    const dir = tempDir()
    await record(dir, "k", 2)
    const key = await newKey(dir, "journal.example/exposed")
    for (const mode of [0o644, 0o640, 0o604, 0o620]) {
      fs.chmodSync(key.file, mode)
      const r = await run(["--dir", dir, "checkpoint", "k", "--sign", key.file])
      assert.strictEqual(r.code, 2, `${mode.toString(8)}: ${r.stderr}`)
      assert.strictEqual(r.stdout, "", "a checkpoint was signed with an exposed key")
      assert.include(r.stderr, `the signer key ${key.file} may be read by others (mode ${mode.toString(8)})`)
      assert.include(r.stderr, `chmod 600 ${key.file}`)
    }
    fs.chmodSync(key.file, 0o400)
    const ok = await run(["--dir", dir, "checkpoint", "k", "--sign", key.file])
    assert.strictEqual(ok.code, 0, ok.stderr)
  })

  it("signs the tree; the journal stays consistent with it as it grows; the proofs verify with the checkpoint alone", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/j")
    await record(dir, "s", 5)
    const cp5 = await sign(dir, "s", key.file)
    const body = cp5.note.split("\n")
    assert.strictEqual(body[0], "journal.example/j/s")
    assert.strictEqual(body[1], "5")
    assert.strictEqual(body[3], "", "a blank line separates text and signature")
    assert.match(body[4]!, /^\u2014 journal\.example\/j [A-Za-z0-9+/]{91}=$/)
    const ok = await verify(dir, "s", cp5.file, key.vkey)
    assert.strictEqual(ok.code, 0, ok.stderr)
    assert.deepInclude(JSON.parse(ok.stdout).checkpoint, {
      ok: true,
      tree_size: 5,
      current_size: 5,
      signed_by: ["journal.example/j"]
    })

    await record(dir, "s", 4, "write")
    const later = await verify(dir, "s", cp5.file, key.vkey)
    assert.strictEqual(later.code, 0, later.stderr)
    assert.deepInclude(JSON.parse(later.stdout).checkpoint, { ok: true, tree_size: 5, current_size: 9 })
    const cp9 = await sign(dir, "s", key.file)

    // The third party: entry hash, proof and the two checkpoints, nothing else.
    const v = SignedNote.parseVerifier(key.vkey)
    assert.isTrue(Result.isSuccess(v))
    if (!Result.isSuccess(v)) return
    const headOf = (note: string) => {
      const opened = SignedNote.open(note, [v.success])
      assert.isTrue(Result.isSuccess(opened))
      const head = TreeHead.parse(Result.isSuccess(opened) ? opened.success.text : "")
      assert.isTrue(Result.isSuccess(head))
      return Result.isSuccess(head) ? head.success : undefined
    }
    const h5 = headOf(cp5.note)!
    const h9 = headOf(cp9.note)!
    const prove = await run(["--dir", dir, "--json", "prove", "s", "3", "--size", "5"])
    assert.strictEqual(prove.code, 0, prove.stderr)
    const p = JSON.parse(prove.stdout)
    assert.deepStrictEqual(Object.keys(p), ["leaf_index", "tree_size", "entry_hash", "proof"])
    const proof = (nodes: ReadonlyArray<string>) => nodes.map((n) => TreeHead.fromBase64(n)!)
    const leaf = Merkle.leafHash(Merkle.entryLeaf(p.entry_hash))
    assert.isTrue(Result.isSuccess(Merkle.verifyInclusion(p.leaf_index, p.tree_size, leaf, proof(p.proof), h5.root)))
    assert.isFalse(Result.isSuccess(Merkle.verifyInclusion(p.leaf_index, p.tree_size, leaf, proof(p.proof), h9.root)))
    const cons = await run(["--dir", dir, "--json", "consistency", "s", "5", "9"])
    assert.strictEqual(cons.code, 0, cons.stderr)
    const c = JSON.parse(cons.stdout)
    assert.deepStrictEqual(Object.keys(c), ["old_size", "new_size", "proof"])
    assert.isTrue(Result.isSuccess(Merkle.verifyConsistency(5, 9, proof(c.proof), h5.root, h9.root)))

    const beyond = await run(["--dir", dir, "--json", "prove", "s", "3", "--size", "10"])
    assert.strictEqual(beyond.code, 2)
    assert.match(beyond.stderr, /larger than the 9 entries stored/)
    const backwards = await run(["--dir", dir, "--json", "consistency", "s", "6", "5"])
    assert.strictEqual(backwards.code, 2)

    await goChecks(key, [cp5.note, cp9.note], [p], [c])
  })

  it("a cut tail, a replaced session and an edited entry exit 1 and say which", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/j")
    await record(dir, "cut", 6)
    const cp = await sign(dir, "cut", key.file)

    // A clean cut: the last three lines gone, and the checkpoint that would tell.
    const seg = segmentOf(dir, "cut")
    const kept = fs.readFileSync(seg, "utf8").replace(/\0+$/, "").split("\n").filter((l) => l.length > 0).slice(0, -3)
    fs.writeFileSync(seg, kept.map((l) => `${l}\n`).join(""))
    fs.rmSync(path.join(dir, "cut", "checkpoint.json"), { force: true })
    const plain = await run(["--dir", dir, "verify", "cut"])
    assert.strictEqual(plain.code, 0, `the cut alone verifies: ${plain.stdout}${plain.stderr}`)
    const cut = await verify(dir, "cut", cp.file, key.vkey)
    assert.strictEqual(cut.code, 1)
    assert.strictEqual(JSON.parse(cut.stdout).checkpoint.problem.reason, "cut")
    assert.match(cut.stderr, /\(cut\): the checkpoint covers 6 entries, the journal holds 3/)

    // Replaced: the same number of entries, written again.
    fs.rmSync(path.join(dir, "cut"), { recursive: true })
    await record(dir, "cut", 6, "other")
    const replaced = await verify(dir, "cut", cp.file, key.vkey)
    assert.strictEqual(replaced.code, 1)
    assert.strictEqual(JSON.parse(replaced.stdout).checkpoint.problem.reason, "replaced")
    assert.match(replaced.stderr, /\(replaced\): the tree of its first 6 entries has root/)

    // An entry edited in place: the chain says where.
    await record(dir, "edit", 4)
    const cpEdit = await sign(dir, "edit", key.file)
    const segEdit = segmentOf(dir, "edit")
    fs.writeFileSync(segEdit, fs.readFileSync(segEdit, "utf8").replace("\"bytes_read\":2", "\"bytes_read\":9"))
    const edited = await verify(dir, "edit", cpEdit.file, key.vkey)
    assert.strictEqual(edited.code, 1)
    const problem = JSON.parse(edited.stdout).checkpoint.problem
    assert.strictEqual(problem.reason, "chain")
    assert.match(problem.detail, /sequence 2|entry 2|#2|at 2/)
    // Nor will it sign what does not verify.
    const refused = await run(["--dir", dir, "checkpoint", "edit", "--sign", key.file])
    assert.strictEqual(refused.code, 1)
    assert.strictEqual(refused.stdout, "")
  })

  it("another key, another session's checkpoint, a forged signature and a malformed file are refused", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/j")
    const other = await newKey(dir, "journal.example/other")
    await record(dir, "a", 2)
    await record(dir, "b", 2)
    const cpA = await sign(dir, "a", key.file)
    const wrongKey = await verify(dir, "a", cpA.file, other.vkey)
    assert.strictEqual(wrongKey.code, 1)
    assert.match(wrongKey.stderr, /\(signature\): the note is signed by no key it is checked with/)
    const otherSession = await verify(dir, "b", cpA.file, key.vkey)
    assert.strictEqual(otherSession.code, 1)
    assert.strictEqual(JSON.parse(otherSession.stdout).checkpoint.problem.reason, "other_log")
    // The root changed under the signature.
    const forged = path.join(dir, "forged")
    const parts = cpA.note.split("\n")
    parts[2] = TreeHead.base64(new Uint8Array(32).fill(1))
    fs.writeFileSync(forged, parts.join("\n"))
    const bad = await verify(dir, "a", forged, key.vkey)
    assert.strictEqual(bad.code, 1)
    assert.match(bad.stderr, /has a signature that does not verify/)
    const malformed = path.join(dir, "malformed")
    fs.writeFileSync(malformed, "not a note\n")
    const m = await verify(dir, "a", malformed, key.vkey)
    assert.strictEqual(m.code, 2)
    // Keys may come from a file, one per line, the log's and a stranger's.
    const keys = path.join(dir, "keys")
    fs.writeFileSync(keys, `# trusted\n${other.vkey}\n${key.vkey}\n`)
    const fromFile = await verify(dir, "a", cpA.file, keys)
    assert.strictEqual(fromFile.code, 0, fromFile.stderr)
    const noKey = await run(["--dir", dir, "verify", "a", "--checkpoint", cpA.file])
    assert.strictEqual(noKey.code, 2)
    const keyAlone = await run(["--dir", dir, "verify", "a", "--key", key.vkey])
    assert.strictEqual(keyAlone.code, 2)
    assert.match(keyAlone.stderr, /invalid --key: a verifier key is used with --checkpoint/)
  })
})

// ---------------------------------------------------------------------------
// Go's sumdb/note and sumdb/tlog, when installed (Debian: golang-go, golang-golang-x-mod-dev).

const tlogcheck = (): string => goProgram("tlogcheck")

const goChecks = async (
  key: { readonly file: string; readonly vkey: string },
  notes: ReadonlyArray<string>,
  inclusion: ReadonlyArray<unknown>,
  consistency: ReadonlyArray<unknown>
) => {
  if (!hasGo) return
  const bin = tlogcheck()
  const r = spawnSync(bin, ["verify"], {
    input: JSON.stringify({ vkey: key.vkey, notes, inclusion, consistency }),
    encoding: "utf8"
  })
  assert.strictEqual(r.status, 0, r.stderr)
  assert.strictEqual(lines(r.stdout).filter((l) => l.endsWith(" ok")).length, inclusion.length + consistency.length)
  // And Go signs a checkpoint's text with our signer key to the same bytes (Ed25519 is deterministic).
  const text = notes[0]!.slice(0, notes[0]!.lastIndexOf("\n\n") + 1)
  const goSigned = spawnSync(bin, ["sign", fs.readFileSync(key.file, "utf8").trim()], { input: text, encoding: "utf8" })
  assert.strictEqual(goSigned.status, 0, goSigned.stderr)
  assert.strictEqual(goSigned.stdout, notes[0])
}

describe.skipIf(!hasGo)("independent check with Go's sumdb/note and sumdb/tlog", () => {
  it("a refused proof is refused by Go too", async () => {
    const dir = tempDir()
    const key = await newKey(dir, "journal.example/go")
    await record(dir, "g", 3)
    const cp = await sign(dir, "g", key.file)
    const r = await run(["--dir", dir, "--json", "prove", "g", "1"])
    const p = JSON.parse(r.stdout)
    const wrong = { ...p, leaf_index: 2 }
    const out = spawnSync(tlogcheck(), ["verify"], {
      input: JSON.stringify({ vkey: key.vkey, notes: [cp.note], inclusion: [wrong], consistency: [] }),
      encoding: "utf8"
    })
    assert.strictEqual(out.status, 1)
    assert.match(out.stderr, /inclusion of 2 in 3/)
  })
})
