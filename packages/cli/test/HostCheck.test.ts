/**
 * The Host check against DNS rebinding, as a pure function: the names a
 * rebinding page would send are refused, the exact loopback names with the
 * bound port accepted, and a model (exact membership, port 80 implied only
 * where browsers imply it) agrees with it on generated Host headers.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as HostCheck from "../src/viewer/HostCheck.ts"

const STRESS = process.env["STRESS"] === "1"

describe("HostCheck", () => {
  it("refuses names that only start like a loopback name, and wrong or missing ports", () => {
    const p = HostCheck.policy(8080)
    for (
      const host of [
        "127.0.0.1.attacker.example:8080",
        "127.evil.example:8080",
        "127.0.0.1.nip.io:8080",
        "attacker.example:8080",
        "localhost.:8080",
        "localhost.attacker.example:8080",
        "127.0.0.2:8080",
        "[::1].evil:8080",
        "[::2]:8080",
        "127.0.0.1:80",
        "127.0.0.1:08080",
        "127.0.0.1:",
        "127.0.0.1",
        "localhost",
        "localhost:8080 ",
        " localhost:8080",
        "user@localhost:8080",
        "localhost:8080/x",
        "",
        undefined
      ]
    ) {
      assert.isFalse(HostCheck.allows(p, host), String(host))
    }
    for (const host of ["127.0.0.1:8080", "localhost:8080", "[::1]:8080", "LocalHost:8080"]) {
      assert.isTrue(HostCheck.allows(p, host), host)
    }
  })

  it("leaves the port out only for port 80, where browsers leave it out", () => {
    const p = HostCheck.policy(80)
    assert.isTrue(HostCheck.allows(p, "localhost"))
    assert.isTrue(HostCheck.allows(p, "localhost:80"))
    assert.isFalse(HostCheck.allows(p, "localhost:8080"))
  })

  it("extra names: with the bound port, or the port they name", () => {
    const p = HostCheck.policy(8080, ["viewer.test", "Forward.Test:9000", "[fd00::1]"])
    assert.isTrue(HostCheck.allows(p, "viewer.test:8080"))
    assert.isTrue(HostCheck.allows(p, "forward.test:9000"))
    assert.isFalse(HostCheck.allows(p, "forward.test:8080"))
    assert.isTrue(HostCheck.allows(p, "[fd00::1]:8080"))
    assert.isFalse(HostCheck.allows(p, "viewer.test.attacker.example:8080"))
    assert.isFalse(HostCheck.allows(p, "a.viewer.test:8080"))
    assert.isTrue(HostCheck.allows(p, "localhost:8080"))
    assert.isNull(HostCheck.parseName("a b"))
    assert.isNull(HostCheck.parseName("x:0"))
    assert.isNull(HostCheck.parseName("x:65536"))
    assert.isNull(HostCheck.parseName("-x"))
    assert.deepStrictEqual(HostCheck.parseName("X.Y:443"), { name: "x.y", port: 443 })
  })

  it("a bind address is loopback only when it is one, not when its name starts with 127.", () => {
    for (const a of ["127.0.0.1", "127.1.2.3", "127.255.255.255", "localhost", "::1", "[::1]"]) {
      assert.isTrue(HostCheck.isLoopbackAddress(a), a)
    }
    for (
      const a of [
        "0.0.0.0",
        "::",
        "127.0.0.1.nip.io",
        "127.evil.example",
        "127.0.0.256",
        "127.0.0",
        "10.0.0.1",
        "192.168.1.1"
      ]
    ) {
      assert.isFalse(HostCheck.isLoopbackAddress(a), a)
    }
  })

  it("agrees with the model: accepted exactly when the header is an accepted name with the bound port", () => {
    const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?$/)
    const name = fc.oneof(
      fc.constantFrom(...HostCheck.LOOPBACK_NAMES, "viewer.test", "127.0.0.2", "[::2]", "127", "local", "0.0.0.0"),
      fc.tuple(fc.constantFrom(...HostCheck.LOOPBACK_NAMES, "viewer.test"), label).map(([n, l]) => `${n}.${l}`),
      fc.tuple(label, fc.constantFrom(...HostCheck.LOOPBACK_NAMES, "viewer.test")).map(([l, n]) => `${l}.${n}`),
      label
    )
    const cased = fc.tuple(name, fc.boolean()).map(([n, upper]) => (upper ? n.toUpperCase() : n))
    const port = fc.constantFrom(80, 8080, 8081, 1, 65535)
    const host = fc.oneof(
      fc.tuple(cased, port).map(([n, p]) => `${n}:${p}`),
      cased,
      fc.tuple(cased, port, fc.constantFrom(" ", ".", "/", "@x", ":1")).map(([n, p, junk]) => `${n}:${p}${junk}`)
    )
    fc.assert(
      fc.property(fc.constantFrom(80, 8080), host, (bound, header) => {
        const accepted = new Set([...HostCheck.LOOPBACK_NAMES, "viewer.test"].map((n) => `${n}:${bound}`))
        const lower = header.toLowerCase()
        const expected = accepted.has(lower) || (bound === 80 && accepted.has(`${lower}:80`))
        assert.strictEqual(HostCheck.allows(HostCheck.policy(bound, ["viewer.test"]), header), expected, header)
      }),
      { numRuns: STRESS ? 100_000 : 5000 }
    )
  })
})
