/**
 * How Claude Code names a project's directory under `~/.claude/projects`: the
 * working directory with every UTF-16 code unit outside `[A-Za-z0-9]` replaced
 * by `-`, with no collapsing of runs (`/home/me/my_app.v2` →
 * `-home-me-my-app-v2`, `C:\git\x` → `C--git-x`, an astral character → `--`).
 * Past 200 characters Claude Code keeps the first 200 and appends `-` and a
 * hash of the original path whose function differs between its builds, so a
 * long path is matched by that prefix.
 *
 * The encoding is lossy (`/a/b-c`, `/a/b/c` and `/a/b_c` share a directory),
 * so a directory name is never decoded back into a path: a path is encoded and
 * compared. Pure.
 *
 * @since 0.1.0
 */

/**
 * Length past which Claude Code truncates the encoded name and appends a hash.
 *
 * @since 0.1.0
 */
export const MAX_ENCODED_LENGTH = 200

/**
 * The directory name Claude Code derives from a working directory, before any
 * truncation.
 *
 * @since 0.1.0
 */
export const encode = (cwd: string): string => cwd.replace(/[^A-Za-z0-9]/g, "-")

/**
 * Whether the project directory `name` is the one Claude Code uses for `cwd`:
 * equal to its encoding, or, when the encoding is longer than 200 characters,
 * its first 200 characters followed by `-` and a hash.
 *
 * @since 0.1.0
 */
export const matches = (name: string, cwd: string): boolean => {
  const encoded = encode(cwd)
  if (encoded.length <= MAX_ENCODED_LENGTH) return name === encoded
  const prefix = encoded.slice(0, MAX_ENCODED_LENGTH) + "-"
  return name.length > prefix.length && name.startsWith(prefix) && /^[A-Za-z0-9-]+$/.test(name.slice(prefix.length))
}
