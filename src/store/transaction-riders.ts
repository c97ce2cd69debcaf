// Writes that ride in the next transaction a caller commits rather than committing on their own: a
// step's attempt-ledger row goes in the step's own transactions, each commit synced once, not twice.
import { AsyncLocalStorage } from 'node:async_hooks';

/** What a rider wrote in a transaction, told how the transaction ended. */
export interface RiderWrite {
  committed(): void;
  /** inDoubt: the COMMIT got no answer that says it failed, so it may have taken effect. */
  rolledBack(inDoubt: boolean): void;
}

/** `Tx` is where the transaction's statements run (the store's Queryable). */
export interface Rider<Tx> {
  /** Called inside the transaction, after the caller's own statements and before COMMIT; undefined when it wrote nothing. */
  write(tx: Tx): Promise<RiderWrite | undefined>;
}

const riders = new AsyncLocalStorage<Rider<never>>();

/** Runs `fn` with `rider` carried by every transaction it commits, however deep in its async calls. */
export function withRider<Tx, T>(rider: Rider<Tx>, fn: () => Promise<T>): Promise<T> {
  return riders.run(rider as Rider<never>, fn);
}

export function currentRider<Tx>(): Rider<Tx> | undefined {
  return riders.getStore() as Rider<Tx> | undefined;
}

/**
 * Runs a transaction's own work: a transaction opened inside it (another connection's, e.g. a store fault's
 * competing writer) carries nothing, or it would commit the rider's rows apart from the transaction they ride in.
 */
export function withoutRider<T>(fn: () => Promise<T>): Promise<T> {
  return riders.exit(fn);
}
