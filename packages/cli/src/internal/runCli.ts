/**
 * The command tree on Node: runs it and turns the outcome into the process exit
 * code of the contract (loaded by `main.ts` for every command it does not
 * recognize first), as `processMain.ts` runs a command.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Effect from "effect/Effect"
import { main } from "../index.ts"
import * as ProcessMain from "./processMain.ts"

ProcessMain.run(main.pipe(Effect.provide(NodeServices.layer)))
