// A write carried inside another's transaction (the order update in the refund's receipt transaction, one commit fewer),
// kept apart by a savepoint so that its refusal undoes it alone.
import { sql } from 'kysely';
import type { Queryable } from './database';
import { serializationFailure } from './serialization';

/**
 * `fn` behind a savepoint of the transaction `tx`: undefined, its writes undone and the rest of the transaction kept,
 * when it throws anything but a serialization failure (which aborts the whole transaction, to be run again).
 */
export async function savepoint<T>(tx: Queryable, fn: () => Promise<T>): Promise<T | undefined> {
  await tx.run(sql.raw('SAVEPOINT carried'));
  try {
    const value = await fn();
    await tx.run(sql.raw('RELEASE SAVEPOINT carried'));
    return value;
  } catch (err) {
    if (serializationFailure(err)) throw err;
    await tx.run(sql.raw('ROLLBACK TO SAVEPOINT carried'));
    await tx.run(sql.raw('RELEASE SAVEPOINT carried'));
    return undefined;
  }
}
