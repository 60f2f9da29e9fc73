import { Persistence } from "../src/index.ts"
import { suite } from "./PersistenceContract.ts"

suite("memory", Persistence.layerMemory())
