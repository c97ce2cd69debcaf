import fs from 'node:fs';
import path from 'node:path';
import { redactUrl } from '../reliability/redaction';
import { openPostgres, openSqlite, type Database, type StoreObserver } from './database';
import { migrate } from './migrations';
import { sqlOrderStore, type OrderStore, type OrderStoreOptions } from './order-store';

export * from './types';
export * from './errors';
export type { QueuedRequest, RefundQueue } from './refund-queue';
export type { StoreFaultKind } from './store-faults';
export type { KeyedSendRecord } from './sends';
export { OutOfStockError, type Cart, type StockReceipt } from './checkouts';
export type { OrderStore } from './order-store';
export type { OperationLog } from './operation-log';
export type { OpenAttempt } from './attempt-rows';
export type { Dialect, StoreObserver } from './database';
export { pgCode, sqliteCode } from './serialization';

const ACCEPTED_FORMS =
  '"sqlite:/absolute/path.db", "sqlite:relative/path.db", "sqlite::memory:" or "postgres://user:password@host:5432/database"';

export interface OpenStoreOptions extends Pick<OrderStoreOptions, 'beforeOrderWrite' | 'busyTimeoutMs'> {
  /** Reads armed store faults (tests and chaos runs); needs a database a second connection can reach. */
  faults?: boolean;
  /** PostgreSQL connections this process keeps open at most. */
  poolSize?: number;
  /** SQLite: this store's connection behaves as another process's would (see openSqlite); for tests of competing writers. */
  asAnotherProcess?: boolean;
  /** Counts the statements and commits of the store's own connection (not the faults' second one). */
  observer?: StoreObserver;
}

/**
 * Opens the store a DATABASE_URL names and brings its schema to the newest version. Relative
 * SQLite paths resolve against the working directory; a PostgreSQL server that does not answer
 * fails here, with the URL (without its password) in the message.
 */
export async function openStore(databaseUrl: string, options: OpenStoreOptions = {}): Promise<OrderStore> {
  const open = connector(databaseUrl, options);
  const db = await open(options.asAnotherProcess ?? false);
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return sqlOrderStore(db, { ...options, openFaultConnection: options.faults ? () => open(true) : undefined });
}

/** How to open a connection to the database the URL names (the store's own, or a second one for faults). */
function connector(databaseUrl: string, options: OpenStoreOptions): (asAnotherProcess: boolean) => Promise<Database> {
  const lockTimeoutMs = options.busyTimeoutMs;
  const observed = (asAnotherProcess: boolean) => (asAnotherProcess ? undefined : options.observer);
  if (/^postgres(ql)?:\/\//i.test(databaseUrl)) {
    return (asAnotherProcess) =>
      openPostgres(databaseUrl, { lockTimeoutMs, poolSize: options.poolSize, observer: observed(asAnotherProcess) });
  }
  if (!databaseUrl.startsWith('sqlite:')) {
    throw new Error(`unsupported DATABASE_URL "${redactUrl(databaseUrl)}": expected ${ACCEPTED_FORMS}`);
  }
  const location = databaseUrl.slice('sqlite:'.length);
  if (location === ':memory:') {
    if (options.faults)
      throw new Error('store faults need a database file: an in-memory database has no second connection');
    return async () => openSqlite(':memory:', { busyTimeoutMs: lockTimeoutMs, observer: options.observer });
  }
  // "sqlite://host/..." would be read as a path starting with "//", which is never what was meant.
  if (location === '' || location.startsWith('//')) {
    throw new Error(`DATABASE_URL "${databaseUrl}" names no usable SQLite file: expected ${ACCEPTED_FORMS}`);
  }
  const file = path.resolve(location);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  return async (asAnotherProcess) =>
    openSqlite(file, { busyTimeoutMs: lockTimeoutMs, asAnotherProcess, observer: observed(asAnotherProcess) });
}
