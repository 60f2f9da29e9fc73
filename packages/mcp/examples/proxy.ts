// An MCP gateway in a program of your own: stdin/stdout is the client, the
// command after `--` the server; every tools/call is decided by the policy and
// journaled under ./journal (or the directory given first).
//
//   node proxy.ts ./journal -- npx -y @modelcontextprotocol/server-everything stdio
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Policy, SessionJournal } from "@session-journal/core"
import { Gateway } from "@session-journal/mcp"
import { NodePersistence } from "@session-journal/node"
import { Effect, Layer, Result, Stream } from "effect"

const [root = "./journal", , command = "npx", ...args] = process.argv.slice(2)
const policy = Policy.decode({ denyList: ["mcp__everything__get-env"] })
if (Result.isFailure(policy)) throw policy.failure

const Journal = SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root })))
const program = Gateway.run({
  name: "everything",
  server: { _tag: "Command", command, args },
  guard: Policy.compile(policy.success),
  policyName: "inline"
}, {
  input: Stream.fromAsyncIterable(process.stdin, (e) => e),
  write: (bytes) =>
    Effect.callback<void, unknown>((resume) => {
      process.stdout.write(bytes, (e) => resume(e ? Effect.fail(e) : Effect.void))
    })
}).pipe(
  Effect.tap((summary) => Effect.sync(() => console.error(`${summary.calls} calls, ${summary.denied} denied`)))
)
Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Journal, NodeServices.layer))))
