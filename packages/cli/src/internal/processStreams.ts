/**
 * The one module that writes to the process's stdout and stderr. Everything else
 * writes through Effect's `Console` (`Output.ts`), whose process form
 * (`Output.processConsole`) calls these; the command hook and the guard's
 * forwarder, which start without Effect, call them directly. Node built-ins only.
 */

/**
 * Writes to stdout and calls `done` once the write did, with the error when it
 * failed (a full disk, a closed file). On Linux, writes to pipes and files are
 * synchronous, so output is never lost at exit.
 */
export const writeStdout = (data: string | Uint8Array, done: (error?: unknown) => void): void => {
  try {
    process.stdout.write(data, (error) => done(error ?? undefined))
  } catch (e) {
    done(e)
  }
}

/** Writes to stderr, as it is (the caller supplies newlines); never fails. */
export const writeStderr = (text: string): void => {
  process.stderr.write(text)
}

/** Writes to stderr and resolves once the write was handed over (errors ignored). */
export const writeStderrAwait = (text: string): Promise<void> =>
  new Promise((resolve) => {
    if (text === "") return resolve()
    process.stderr.write(text, () => resolve())
  })

/** Writes to stdout and resolves once the write was handed over (errors ignored). */
export const writeStdoutAwait = (text: string): Promise<void> =>
  new Promise((resolve) => {
    if (text === "") return resolve()
    process.stdout.write(text, () => resolve())
  })

/** The width of stdout when it is a terminal; undefined when it is not. */
export const stdoutColumns = (): number | undefined =>
  process.stdout.isTTY === true ? process.stdout.columns || 80 : undefined

/** The width of stderr when it is a terminal; undefined when it is not. */
export const stderrColumns = (): number | undefined =>
  process.stderr.isTTY === true ? process.stderr.columns || 80 : undefined
