import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Persistence } from "../src/index.ts"
import { serviceOver, suite } from "./ClockBounds.ts"

// One memory store per test, shared by the services the test builds over it.
suite(
  "a writer's clock on the memory adapter",
  () => serviceOver(Layer.succeed(Persistence.Persistence, Effect.runSync(Persistence.makeMemory())))
)
