/**
 * Entry point of the `session-journal` command. The resident guard's forwarder
 * (`claude-code forward`, `commands/ForwardProcess.ts`, run by Claude Code once per event)
 * is recognized first and loads nothing but its own file (the build bundles it
 * into one, `scripts/bundle.ts`); the command hooks (`claude-code hook`, `codex
 * hook`, once per event too) and a plain `record` (once per tool call of an
 * agent's hook, `internal/recordArgs.ts`) run without the command tree, whose
 * modules they do not need, each from a script of its own with its code cache
 * (`internal/codeCache.ts`); every other invocation runs the command tree
 * (`internal/runCli.ts`).
 *
 * @since 0.1.0
 */
// A command's script with its code cache (`internal/codeCache.ts`, a chunk of its
// own: the forwarder's entry holds nothing it does not run) when its journal is a
// directory; with PostgreSQL (`--postgres`, else `SESSION_JOURNAL_PG_URL` as
// `Storage` reads it), which that script leaves out, the module as usual.
const codeCached = async <M>(name: string, postgres: string | undefined, fallback: () => Promise<M>) => {
  const url = process.env["SESSION_JOURNAL_PG_URL"]
  if (postgres !== undefined || (url !== undefined && url !== "")) {
    return { module: await fallback(), save: (_kind: string) => {} }
  }
  const CodeCache = await import("./internal/codeCache.ts")
  return CodeCache.load(import.meta.url, name, process.env, fallback)
}

const argv = process.argv.slice(2)
if (argv[0] === "claude-code" && argv[1] === "forward") {
  // The guard's command hook: its own small module (Node's modules only), once per event.
  const { main } = await import("./commands/ForwardProcess.ts")
  process.exit(await main(argv.slice(2)))
} else {
  // The recognizers, each a small chunk: the forwarder's entry holds nothing it does not run.
  const [{ hookArgs }, { recordArgs }] = await Promise.all([
    import("./internal/hookArgs.ts"),
    import("./internal/recordArgs.ts")
  ])
  const codex = argv.includes("codex") ? hookArgs(argv, "codex") : null
  const hook = codex === null ? hookArgs(argv) : null
  const record = codex === null && hook === null ? recordArgs(argv) : null
  if (codex !== null) {
    // Codex's command hook, once per tool call too: its own module, without the command tree.
    const { module, save } = await codeCached("CodexHook", codex.postgres, () => import("./commands/CodexHook.ts"))
    const { code, event } = await module.main(codex)
    save(event ?? "unread")
    process.exit(code)
  } else if (hook !== null) {
    const { module, save } = await codeCached("HookProcess", hook.postgres, () => import("./commands/HookProcess.ts"))
    const { code, event } = await module.main(hook)
    // The code cache, after the answer: once per version of the script and kind of event.
    save(event ?? "unread")
    // Nothing of the hook's may keep the process alive past its answer: a hook that
    // does not end is one Claude Code times out, and a timeout fails open.
    process.exit(code)
  } else if (record !== null) {
    // `record`, once per tool call of an agent's hook: the command without the tree.
    const { module, save } = await codeCached(
      "RecordProcess",
      record.postgres,
      () => import("./commands/RecordProcess.ts")
    )
    // The code cache is written once the process is done (`main` ends it).
    process.once("exit", () => save("record"))
    module.main(record)
  } else {
    await import("./internal/runCli.ts")
  }
}
