/**
 * The resident guard's request scheme (`sj1`) as a public module: how a client
 * signs a request to the guard with its token, and checks the guard's signed
 * answer, without ever sending the token. The scheme is stated once, in
 * `internal/guardAuth.ts`, which the forwarder, the installer and the guard use.
 *
 * @since 0.1.0
 */
export * from "./internal/guardAuth.ts"
