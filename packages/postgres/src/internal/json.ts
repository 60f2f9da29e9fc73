/**
 * JSON text for stored entries. `JSON.stringify` writes `-0` as `0`, which would
 * change a payload on its way through storage (the hash survives, since RFC 8785
 * also writes `0`, but the entry read back would differ from the one written).
 * This writer keeps `-0`; everything else is exactly `JSON.stringify`, and
 * `JSON.parse` reads it back unchanged.
 */

import { Entry } from "@session-journal/core"

/**
 * Serializes plain JSON data (as produced by `Entry.encode`), keeping `-0`.
 */
export const stringify = Entry.toJsonText
