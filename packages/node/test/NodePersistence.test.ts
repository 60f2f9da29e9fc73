import { suite } from "@session-journal/core/test/PersistenceContract"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { NodePersistence } from "../src/index.ts"

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sj-contract-"))
fs.chmodSync(tmp, 0o700)

suite("node", NodePersistence.layer({ root: path.join(tmp, "journal") }))
