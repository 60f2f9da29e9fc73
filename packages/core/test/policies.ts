/**
 * Random policies of the keys that were there before patterns (as JSON, next to the
 * guard written by hand with the combinators), shared by the policy tests.
 */
import { assert } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Guard, Policy } from "../src/index.ts"
import * as A from "./arbitraries.ts"

// A policy as JSON, next to the guard written by hand with the combinators.
export interface Built {
  readonly json: unknown
  readonly guard: Guard.Guard
}

export const limit = fc.oneof(fc.nat(6), fc.nat(2000), fc.constant(0), fc.maxSafeNat())
const names = fc.array(A.toolName, { maxLength: 4 })

export const built: fc.Arbitrary<Built> = fc.letrec<{ node: Built }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    limit.map((n) => ({ json: { maxBytesRead: n }, guard: Guard.maxBytesRead(n) })),
    limit.map((n) => ({ json: { maxBytesWritten: n }, guard: Guard.maxBytesWritten(n) })),
    limit.map((n) => ({ json: { maxInvocations: n }, guard: Guard.maxInvocations(n) })),
    limit.map((n) => ({ json: { maxDelegationDepth: n }, guard: Guard.maxDelegationDepth(n) })),
    limit.map((n) => ({ json: { maxStreak: n }, guard: Guard.maxStreak(n) })),
    fc.array(fc.tuple(A.toolName, A.toolName), { maxLength: 4 }).map((pairs) => ({
      json: { forbiddenTransitions: pairs },
      guard: Guard.forbiddenTransitions(pairs)
    })),
    fc.dictionary(A.toolName, names, { maxKeys: 3 }).map((required) => ({
      json: { requirePredecessors: required },
      guard: Guard.requirePredecessors(required)
    })),
    names.map((list) => ({ json: { allowList: list }, guard: Guard.allowList(list) })),
    names.map((list) => ({ json: { denyList: list }, guard: Guard.denyList(list) })),
    fc.array(tie("node"), { maxLength: 4 }).map((cs) => ({
      json: { all: cs.map((c) => c.json) },
      guard: Guard.all(...cs.map((c) => c.guard))
    })),
    fc.array(tie("node"), { maxLength: 4 }).map((cs) => ({
      json: { any: cs.map((c) => c.json) },
      guard: Guard.any(...cs.map((c) => c.guard))
    }))
  )
})).node

/** A policy document decoded, failing the test when it does not decode. */
export const decoded = (json: unknown): Policy.Policy => {
  const r = Policy.decode(json)
  if (Result.isFailure(r)) assert.fail(`did not decode: ${r.failure.message}`)
  return r.success
}
