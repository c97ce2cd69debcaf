// Serialization failures: the database aborted a transaction because of a concurrent one, so nothing
// of it was committed and running the whole transaction again is safe. PostgreSQL's SERIALIZABLE
// aborts for predicate-lock overlaps too (its index locks cover pages, not keys), so a transaction
// can be aborted though no other writer touched the rows it read: the store runs it again itself.

/** The SQLSTATE of an error the PostgreSQL server raised, if it is one. */
export function pgCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; severity?: unknown } | null;
  return typeof e?.code === 'string' && typeof e.severity === 'string' && /^[0-9A-Z]{5}$/.test(e.code)
    ? e.code
    : undefined;
}

// Checked by code, not instanceof: the native addon keeps the SqliteError class (and realm) of its first load, which jest's per-file sandboxes do not share.
export function sqliteCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

/** PostgreSQL's codes for a transaction aborted because of a concurrent one. */
const PG_SERIALIZATION = new Set(['40001', '40P01']);

/**
 * The server answered that it aborted the transaction for a concurrent one (PostgreSQL 40001/40P01, SQLite's
 * stale snapshot of a deferred transaction): nothing of it committed, even when the answer came to COMMIT.
 * A COMMIT that got no answer (a lost connection) is none of these: its outcome is unknown.
 */
export function serializationFailure(err: unknown): boolean {
  const pg = pgCode(err);
  return (pg !== undefined && PG_SERIALIZATION.has(pg)) || sqliteCode(err) === 'SQLITE_BUSY_SNAPSHOT';
}

/** Tries of one transaction at most, the first included; past them the last failure is thrown (the activity's CAPACITY). */
const SERIALIZATION_TRIES = 8;
const BACKOFF_BASE_MS = 5;
const BACKOFF_CAP_MS = 200;

/**
 * For a transaction that read rows before writing them and whose caller must hear of another writer
 * (VersionConflictError) rather than have its write redone over one: asked after a serialization failure,
 * it returns the conflict when what the aborted try read has moved since, or undefined when it stands
 * (the abort was an overlap of predicate locks, and the transaction runs again).
 */
export type MovedSince = (failure: unknown) => Promise<Error | undefined>;

/**
 * Runs a transaction (`once`: one try, BEGIN to COMMIT or ROLLBACK), again after each serialization failure, at most
 * SERIALIZATION_TRIES times, each after a full-jitter wait so that the transactions that collided do not meet again.
 */
export async function runSerializable<T>(
  once: () => Promise<T>,
  { moved, retrying }: { moved?: MovedSince; retrying?: () => void },
): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await once();
    } catch (err) {
      if (!serializationFailure(err)) throw err;
      // When `moved` cannot look, the transaction's own failure stands, which is certain (nothing committed).
      const conflict = moved && (await moved(err).catch(() => err));
      if (conflict) throw conflict;
      if (tries >= SERIALIZATION_TRIES) throw err;
      retrying?.();
      const backoffMs = Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (tries - 1));
      await new Promise((resolve) => setTimeout(resolve, backoffMs));
    }
  }
}
