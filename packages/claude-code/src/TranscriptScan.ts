/**
 * Reading an agent's transcripts incrementally before a door decides, as a
 * public module: each event reads only the bytes after what was counted
 * (`readOn`, `usageScan`), the scan kept between events by a `Keeper` (a small
 * file per journal session beside the user's state directory, `fileKeeper` and
 * `cacheDir`, or memory); `awaitCall` waits until a transcript holds the call
 * being decided. Claude Code's doors (`totals`) and Codex's hook (its rollouts'
 * tokens) share it; the rules are stated once, in `internal/transcriptScan.ts`.
 *
 * @since 0.1.0
 */
export {
  awaitCall,
  cacheDir,
  fileKeeper,
  type Keeper,
  memoryKeeper,
  noKeeper,
  readOn,
  usageScan
} from "./internal/transcriptScan.ts"
