// The order store as one object: its parts (orders, outbox, operation log, queue, provider events,
// faults, the checkout's carts and send records) share one database, and the outbox, the send
// records and the operation log share its clock.
import { sql } from 'kysely';
import type { Database } from './database';
import { SqlCheckouts } from './checkouts';
import { SqlSends } from './sends';
import { SqlNotificationOutbox } from './notification-outbox';
import { OperationLog } from './operation-log';
import { SqlOrders, type BeforeOrderWrite } from './orders';
import { ProviderEventLog } from './provider-event-log';
import { RefundQueue } from './refund-queue';
import { StoreFaults } from './store-faults';

export interface OrderStoreOptions {
  /** Test seam: runs inside the transaction, after reading the order and before the transaction's first write. */
  beforeOrderWrite?: BeforeOrderWrite;
  /** Reads armed faults (see StoreFaults) through a second connection this opens; off unless given. */
  openFaultConnection?: () => Promise<Database>;
  /** How long a write waits for another connection's lock (SQLite busy_timeout, PostgreSQL lock_timeout). */
  busyTimeoutMs?: number;
}

/** What the workers, the CLI and inspect reach orders and the project's own records through. */
export type OrderStore = ReturnType<typeof sqlOrderStore>;

/** The order store on a SQLite or PostgreSQL database (see database.ts); each call is one transaction. */
export function sqlOrderStore(db: Database, options: OrderStoreOptions = {}) {
  const operations = new OperationLog(db);
  const faults = new StoreFaults(db, options.openFaultConnection, options.busyTimeoutMs ?? 5000);
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
    seedOrder: orders.seedOrder.bind(orders),
    getOrder: orders.getOrder.bind(orders),
    applyRefund: orders.applyRefund.bind(orders),
    revertRefund: orders.revertRefund.bind(orders),
    appliedRefund: orders.appliedRefund.bind(orders),
    claimNotification: outbox.claimNotification.bind(outbox),
    claimHandOver: outbox.claimHandOver.bind(outbox),
    markNotificationSending: outbox.markNotificationSending.bind(outbox),
    takeOverNotification: outbox.takeOverNotification.bind(outbox),
    releaseNotification: outbox.releaseNotification.bind(outbox),
    markNotificationSent: outbox.markNotificationSent.bind(outbox),
    confirmNotificationDelivered: outbox.confirmNotificationDelivered.bind(outbox),
    getNotification: outbox.getNotification.bind(outbox),
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
