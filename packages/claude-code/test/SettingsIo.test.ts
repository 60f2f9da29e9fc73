/**
 * How `install` reads and replaces a settings file (`internal/settingsIo.ts`), on
 * real files: a file changed by someone else between the read and the write is
 * not replaced (and gets no backup); nothing temporary is left behind; a FIFO or
 * a directory at the name is refused without blocking; a chain of links is
 * followed to its final target; backups never reuse a name.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import * as SettingsIo from "../src/internal/settingsIo.ts"
import { cleanup, tempDir } from "./claudeCli.ts"

afterAll(cleanup)

const MAX = 1024 * 1024

describe("settingsIo", () => {
  it("does not replace a file that changed after it was read", () => {
    const dir = tempDir()
    const file = path.join(dir, "settings.json")
    fs.writeFileSync(file, "{}")
    const loaded = SettingsIo.load(file, MAX)
    fs.writeFileSync(file, "{\"theirs\": true}")
    assert.throws(
      () => SettingsIo.save(loaded, "{\"ours\": true}"),
      SettingsIo.SettingsFileError,
      /changed while install ran/
    )
    assert.strictEqual(fs.readFileSync(file, "utf8"), "{\"theirs\": true}")
    assert.deepStrictEqual(fs.readdirSync(dir), ["settings.json"])

    // Nor one that appeared after it was read as missing.
    const other = path.join(dir, "new.json")
    const none = SettingsIo.load(other, MAX)
    assert.isNull(none.text)
    fs.writeFileSync(other, "{}")
    assert.throws(() => SettingsIo.save(none, "{\"ours\": true}"), /changed while install ran/)
    assert.strictEqual(fs.readFileSync(other, "utf8"), "{}")
  })

  it("replaces atomically, leaves nothing temporary, keeps the mode, and backs up under fresh names", () => {
    const dir = tempDir()
    const file = path.join(dir, "settings.json")
    fs.writeFileSync(file, "one", { mode: 0o600 })
    const first = SettingsIo.save(SettingsIo.load(file, MAX), "two")
    const second = SettingsIo.save(SettingsIo.load(file, MAX), "three")
    assert.strictEqual(first.backup, file + ".session-journal.bak")
    assert.strictEqual(second.backup, file + ".session-journal.1.bak")
    assert.strictEqual(fs.readFileSync(file, "utf8"), "three")
    assert.strictEqual(fs.readFileSync(first.backup!, "utf8"), "one")
    assert.strictEqual(fs.readFileSync(second.backup!, "utf8"), "two")
    assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
    assert.deepStrictEqual(fs.readdirSync(dir).sort(), [
      "settings.json",
      "settings.json.session-journal.1.bak",
      "settings.json.session-journal.bak"
    ])
  })

  it("refuses a FIFO or a directory at the name, without blocking", () => {
    const dir = tempDir()
    const fifo = path.join(dir, "fifo.json")
    execFileSync("mkfifo", [fifo])
    assert.throws(() => SettingsIo.load(fifo, MAX), /not a regular file/)
    const sub = path.join(dir, "sub.json")
    fs.mkdirSync(sub)
    assert.throws(() => SettingsIo.load(sub, MAX), /not a regular file/)
    const big = path.join(dir, "big.json")
    fs.writeFileSync(big, "x".repeat(100))
    assert.throws(() => SettingsIo.load(big, 10), /larger than 10 bytes/)
    const bad = path.join(dir, "bad.json")
    fs.writeFileSync(bad, Buffer.from([0x7b, 0xff, 0x7d]))
    assert.throws(() => SettingsIo.load(bad, MAX), /not UTF-8/)
  })

  it("follows a chain of links to the final target and replaces it there", () => {
    const dir = tempDir()
    fs.mkdirSync(path.join(dir, "repo", "claude"), { recursive: true })
    const target = path.join(dir, "repo", "claude", "settings.json")
    fs.writeFileSync(target, "{}")
    fs.symlinkSync(target, path.join(dir, "middle.json"))
    const link = path.join(dir, "settings.json")
    fs.symlinkSync("middle.json", link)
    const loaded = SettingsIo.load(link, MAX)
    assert.isTrue(loaded.linked)
    assert.strictEqual(loaded.target, fs.realpathSync(target))
    SettingsIo.save(loaded, "{\"a\": 1}")
    assert.strictEqual(fs.readFileSync(target, "utf8"), "{\"a\": 1}")
    assert.isTrue(fs.lstatSync(link).isSymbolicLink())
    assert.isTrue(fs.lstatSync(path.join(dir, "middle.json")).isSymbolicLink())
    assert.deepStrictEqual(fs.readdirSync(path.join(dir, "repo", "claude")), ["settings.json"])
  })
})
