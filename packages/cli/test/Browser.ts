/**
 * Headless Chromium for the page tests: Debian's `chromium` package driven by
 * `playwright-core` (which never downloads a browser). One launch per test file;
 * each launch gets a fresh profile directory and no network services.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type BrowserContext, chromium } from "playwright-core"

/** Where Debian installs Chromium; `.ci/run` installs it when it is missing. */
export const CHROMIUM = "/usr/bin/chromium"

/** Whether the system Chromium is installed. */
export const hasChromium = (): boolean => fs.existsSync(CHROMIUM)

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** A running browser (its one context, with a fresh profile) and its disposal. */
export interface Launched {
  readonly context: BrowserContext
  readonly close: () => Promise<void>
}

/** Launches the system Chromium with a fresh user-data-dir. */
export const launch = async (): Promise<Launched> => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "sj-chromium-"))
  // Playwright takes the profile directory here, not as --user-data-dir.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ARGS,
    headless: true
  })
  const close = async () => {
    await context.close().catch(() => undefined)
    fs.rmSync(profile, { recursive: true, force: true })
  }
  return { context, close }
}
