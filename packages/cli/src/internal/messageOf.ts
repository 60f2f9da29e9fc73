/**
 * The message of a thrown value: an `Error`'s message, anything else as a string.
 * The CLI's one definition (Node built-ins and Effect aside, it imports nothing,
 * so the command hook and the guard's forwarder use it too).
 */
export const messageOf = (e: unknown): string => e instanceof Error ? e.message : String(e)
