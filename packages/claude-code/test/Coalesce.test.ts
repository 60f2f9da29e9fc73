/**
 * Shared reads of the resident guard: callers that ask while a read of their key
 * is under way share the next read, never one that began before they asked; a
 * failure reaches every caller of its read; keys do not wait for each other; and
 * nothing is held once no read is under way.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Coalesce from "../src/internal/coalesce.ts"

/** A read that settles when told: each call is counted and its own value. */
const gated = () => {
  const pending: Array<{ resolve: (n: number) => void; reject: (e: Error) => void }> = []
  let calls = 0
  const read = () =>
    new Promise<number>((resolve, reject) => {
      calls++
      pending.push({ resolve, reject })
    })
  return { read, calls: () => calls, pending }
}

const tick = () => new Promise((resolve) => setImmediate(resolve))

describe("Coalesce.coalescing", () => {
  it("callers during a read share the next one, which begins after it settles", async () => {
    const shared = Coalesce.coalescing<number>()
    const g = gated()
    const first = shared("k", g.read)
    await tick()
    assert.strictEqual(g.calls(), 1)
    // Asked while the first read is under way: they must not get its value.
    const second = shared("k", g.read)
    const third = shared("k", g.read)
    await tick()
    assert.strictEqual(g.calls(), 1)
    g.pending[0]!.resolve(1)
    assert.strictEqual(await first, 1)
    await tick()
    assert.strictEqual(g.calls(), 2)
    g.pending[1]!.resolve(2)
    assert.deepStrictEqual(await Promise.all([second, third]), [2, 2])
    // Nothing under way: the next caller reads at once.
    const fourth = shared("k", g.read)
    await tick()
    assert.strictEqual(g.calls(), 3)
    g.pending[2]!.resolve(3)
    assert.strictEqual(await fourth, 3)
  })

  it("a failed read fails its callers only; keys do not wait for each other", async () => {
    const shared = Coalesce.coalescing<number>()
    const g = gated()
    const a = shared("a", g.read)
    const b = shared("b", g.read)
    await tick()
    assert.strictEqual(g.calls(), 2)
    const a2 = shared("a", g.read)
    g.pending[0]!.reject(new Error("gone"))
    g.pending[1]!.resolve(7)
    const failed = await a.then(() => null, (e: Error) => e.message)
    assert.strictEqual(failed, "gone")
    assert.strictEqual(await b, 7)
    await tick()
    g.pending[2]!.resolve(8)
    assert.strictEqual(await a2, 8)
  })

  it("a read that throws at once fails its callers as a rejection", async () => {
    const shared = Coalesce.coalescing<number>()
    const failed = await shared("k", () => {
      throw new Error("at once")
    }).then(() => null, (e: Error) => e.message)
    assert.strictEqual(failed, "at once")
    assert.strictEqual(await shared("k", () => Promise.resolve(5)), 5)
  })
})
