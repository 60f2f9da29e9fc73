/**
 * The typed failures of reading Claude Code's transcripts and of editing its
 * settings.
 *
 * @since 0.1.0
 */
import { messageOf } from "@session-journal/core/ErrorMessage"
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

/**
 * A Claude Code settings file the installer cannot use: reading or writing it
 * failed (`io`), or its content is not settings it can edit (not an object, not
 * UTF-8, too large, a link that leads nowhere). The file is left unchanged.
 *
 * @since 0.1.0
 */
export class SettingsRefused extends Schema.TaggedError<SettingsRefused>()("SettingsRefused", {
  file: Schema.String,
  io: Schema.Boolean,
  cause: Schema.Defect()
}) {
  override get message(): string {
    return `${this.file}: cannot use it as Claude Code settings (left unchanged): ${messageOf(this.cause)}`
  }
}
