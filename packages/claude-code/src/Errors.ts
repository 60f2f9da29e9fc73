/**
 * The typed failure of reading Claude Code's transcripts.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A path under the transcripts' source could not be used: missing, not a
 * directory, a symbolic link, unreadable, or a file or line above its bound.
 * For the source directory itself it ends the run; for one transcript it is
 * reported for that file and the run goes on.
 *
 * @since 0.1.0
 */
export class SourceError extends Schema.TaggedError<SourceError>()("SourceError", {
  path: Schema.String,
  reason: Schema.String,
  /** The node error code of the failed call (`ENOENT`, `ELOOP`, …), when there was one. */
  code: Schema.optionalKey(Schema.String)
}) {
  override get message(): string {
    return `${this.path}: ${this.reason}`
  }
}
