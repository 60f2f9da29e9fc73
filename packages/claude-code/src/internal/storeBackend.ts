/**
 * Where `JournalSessionStore.open` keeps its journal: the filesystem adapter on a
 * directory, or the PostgreSQL adapter on a URL (loaded only when chosen, so the
 * driver is not needed for the filesystem).
 */
import type { Persistence, StorageError } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The journal's place: a directory, or a PostgreSQL URL with its table prefix. */
export type Backend =
  | { readonly dir: string; readonly postgres?: undefined }
  | { readonly postgres: string; readonly tablePrefix?: string | undefined; readonly dir?: undefined }

/** The `Persistence` layer of a backend. */
export const persistence = (backend: Backend): Layer.Layer<Persistence.Persistence, StorageError> =>
  backend.postgres !== undefined
    ? Layer.unwrap(
      Effect.map(
        Effect.promise(() => import("@session-journal/postgres")),
        (pg) => pg.PgPersistence.layerFromUrl(backend.postgres, { tablePrefix: backend.tablePrefix })
      )
    )
    : NodePersistence.layer({ root: backend.dir })
