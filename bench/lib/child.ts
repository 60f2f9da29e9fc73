/**
 * Runs a benchmark's child process and takes the JSON line it prints last.
 */
import { spawn } from "node:child_process"
import { nodeEnv } from "./adapters.ts"

/** Runs `command args…` and resolves with the parsed last line of its stdout; rejects on a non-zero exit. */
export const lastJsonLine = <A>(label: string, command: string, args: ReadonlyArray<string>): Promise<A> =>
  new Promise((resolve, reject) => {
    const p = spawn(command, [...args], { env: nodeEnv(), stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    p.stdout.on("data", (d) => (out += d))
    p.stderr.on("data", (d) => (err += d))
    p.on("error", reject)
    p.on("close", (code) => {
      if (code !== 0) return reject(new Error(`${label} child exited ${code}: ${err.slice(0, 400)}`))
      try {
        resolve(JSON.parse(out.trim().split("\n").pop()!) as A)
      } catch (error) {
        reject(error)
      }
    })
  })
