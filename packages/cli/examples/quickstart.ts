/**
 * The library example of the root README, as a program: records a conversation and
 * tool calls into ./.session-journal (or the directory given as the first argument),
 * lets two guards decide on calls, and logs every committed entry from the stream.
 *
 * Run it: node_modules/.bin/node packages/cli/examples/quickstart.ts [DIR]
 */
import { Guard, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import { Effect, Layer, Stream } from "effect"

const Journal = SessionJournal.layer().pipe(
  Layer.provide(NodePersistence.layer({ root: process.argv[2] ?? "./.session-journal" }))
)
const policy = Guard.all(Guard.maxStreak(3), Guard.forbiddenTransitions([["write_file", "deploy"]]))
const call = (tool_name: string, bytes_read = 0) => ({
  tool_name,
  server_id: "tools",
  agent_id: "coder",
  bytes_read,
  bytes_written: 0,
  delegation_depth: 0
})

const program = Effect.gen(function*() {
  const journal = yield* SessionJournal.SessionJournal
  const changes = yield* journal.changes("s-1") // subscribed now: nothing committed later is missed
  yield* Effect.forkChild(Stream.runForEach(changes, (c) => Effect.log(c._tag === "Entry" ? c.entry.kind : "missed")))
  yield* journal.append("s-1", "message", { role: "user", content: "Fix the failing test, then deploy." })
  yield* journal.record("s-1", call("read_file", 2048))
  yield* journal.decide("s-1", call("write_file"), policy)
  const { verdict } = yield* journal.decide("s-1", call("deploy"), policy) // journaled as denied
  yield* Effect.log(verdict, yield* journal.head("s-1"))
})

Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(Journal)))
