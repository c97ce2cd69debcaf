// The order store as one object: its parts (orders, outbox, operation log, queue, provider events,
// faults, the checkout's carts and send records) share one database, and the outbox, the send
// records and the operation log share its clock.
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { redactUrl } from '../reliability/redaction';
import { openPostgres, openSqlite, type Database, type Queryable, type StoreObserver } from './database';
import { SqlCheckouts } from './checkouts';
import { completionRecords } from './completion-records';
import { migrate } from './migrations';
import { SqlNotificationOutbox } from './notification-outbox';
import { OperationLog } from './operation-log';
import { SqlOrders, type BeforeOrderWrite } from './orders';
import { ProviderEventLog } from './provider-event-log';
import { RefundQueue } from './refund-queue';
import { SqlSends } from './sends';
import { StoreFaults } from './store-faults';
import type { ApplyRefundInput, AttemptEnd, NewAttempt } from './types';

export * from './types';
export * from './errors';
export type { QueuedRequest, RefundQueue } from './refund-queue';
export type { StoreFaultKind } from './store-faults';
export type { KeyedSendRecord } from './sends';
export type { CompletionRecords } from './completion-records';
export { OutOfStockError, type Cart, type StockReceipt } from './checkouts';
export type { OperationLog } from './operation-log';
export type { OpenAttempt } from './attempt-rows';
export type { Dialect, Queryable, StoreObserver } from './database';
export { pgCode, sqliteCode } from './serialization';

const ACCEPTED_FORMS =
  '"sqlite:/absolute/path.db", "sqlite:relative/path.db", "sqlite::memory:" or "postgres://user:password@host:5432/database"';

export interface OpenStoreOptions {
  /** Test seam: runs inside the transaction, after reading the order and before the transaction's first write. */
  beforeOrderWrite?: BeforeOrderWrite;
  /** How long a write waits for another connection's lock (SQLite busy_timeout, PostgreSQL lock_timeout). */
  busyTimeoutMs?: number;
  /** Reads armed store faults (tests and chaos runs) through a second connection; needs a database it can reach. */
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
  return sqlOrderStore(db, options, options.faults ? () => open(true) : undefined);
}

/** What the workers, the CLI and inspect reach orders and the project's own records through. */
export type OrderStore = ReturnType<typeof sqlOrderStore>;

/** The order store on a SQLite or PostgreSQL database (see database.ts); each call is one transaction. */
function sqlOrderStore(db: Database, options: OpenStoreOptions, openFaultConnection?: () => Promise<Database>) {
  const operations = new OperationLog(db);
  const faults = new StoreFaults(db, openFaultConnection, options.busyTimeoutMs ?? 5000);
  const orders = new SqlOrders(db, operations, async (orderId, tx) => {
    await options.beforeOrderWrite?.(orderId, tx);
    await faults.beforeOrderWrite(orderId);
  });
  const outbox = new SqlNotificationOutbox(db, operations);
  return {
    operations,
    faults,
    queue: new RefundQueue(db),
    providerEvents: new ProviderEventLog(db),
    checkouts: new SqlCheckouts(db),
    sends: new SqlSends(db, operations),
    ...bound(orders, 'seedOrder', 'getOrder', 'applyRefund', 'revertRefund', 'appliedRefund'),
    ...bound(outbox, 'claimNotification', 'claimHandOver', 'markNotificationSending', 'takeOverNotification'),
    ...bound(outbox, 'releaseNotification', 'markNotificationSent', 'confirmNotificationDelivered', 'getNotification'),
    /** The operation's refund on the order, its notice's outbox entry and its audit trail, in one read (the completion gate's). */
    completionRecords: (operationId: string, noticeKey: string) => completionRecords(db, operationId, noticeKey),
    /**
     * The refund applied to the order inside a caller's transaction (the refund's receipt carries it), with the order
     * step's attempt row as `end` says; undefined, nothing written, when a store fault or a test's hook waits for the
     * order's own write, which only the order step's own task makes.
     */
    async carryRefund(tx: Queryable, input: ApplyRefundInput, row: NewAttempt, end: AttemptEnd) {
      if (options.beforeOrderWrite || (await faults.armedFor(input.orderId, tx))) return undefined;
      const order = await orders.applyRefundIn(tx, input);
      return { ...order, evidence: { attempt: row.attempt, ledger: [await operations.carriedAttempt(tx, row, end)] } };
    },
    /** The cheapest round trip to the database (a readiness probe's): throws when it does not answer. */
    async ping(): Promise<void> {
      await db.one(sql`select 1 as ok`);
    },
    async close(): Promise<void> {
      await faults.close();
      await db.close();
    },
  };
}

/** The named methods of one of the store's parts, bound to it: the store's own calls. */
function bound<T, K extends keyof T>(part: T, ...names: K[]): Pick<T, K> {
  return Object.fromEntries(names.map((name) => [name, (part[name] as () => unknown).bind(part)])) as Pick<T, K>;
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
