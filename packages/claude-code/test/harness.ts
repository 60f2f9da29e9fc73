/**
 * The driver's tests' setting: a fresh fake Messages API and a journal in a new
 * temporary directory, a session over them, and the entries of a journal session.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { Session } from "../src/index.ts"
import * as Cli from "./claudeCli.ts"
import * as Fake from "./fakeApi.ts"

/** Where a test runs: the fake API, the CLI's working directory and HOME, the temporary root. */
export interface Setup {
  readonly api: Fake.FakeApi
  readonly work: string
  readonly home: string
  readonly root: string
}

/** A fake API running `script` and a fresh root (`prefix` names it); the API closes with the scope. */
export const setup = (script: Fake.Script, prefix: string) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<Setup> => {
      const api = await Fake.start(script)
      const root = Cli.tempDir(prefix)
      const work = path.join(root, "work")
      const home = path.join(root, "home")
      fs.mkdirSync(path.join(home, "tmp"), { recursive: true })
      fs.mkdirSync(work, { recursive: true })
      return { api, work, home, root }
    }),
    (s) => Effect.promise(() => s.api.close())
  )

/** The journal under `root/journal`, with Node's services. */
export const journalLayer = (root: string) =>
  Layer.mergeAll(
    SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: path.join(root, "journal") }))),
    NodeServices.layer
  )

/** Runs `body` with a session (its options from the setting) over a fresh fake API and journal. */
export const withSession = <A, E>(
  script: Fake.Script,
  prefix: string,
  options: (s: Setup) => Session.Options,
  body: (session: Session.Session, s: Setup) => Effect.Effect<A, E, SessionJournal.SessionJournal | Scope.Scope>
) =>
  Effect.gen(function*() {
    const s = yield* setup(script, prefix)
    return yield* Effect.gen(function*() {
      const session = yield* Session.make(options(s))
      return yield* body(session, s)
    }).pipe(Effect.scoped, Effect.provide(journalLayer(s.root)))
  }).pipe(Effect.scoped)

/** Every entry of a journal session. */
export const entriesOf = (id: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    return yield* Stream.runCollect(journal.entries(id))
  })
