// The OrderStore as one object: its parts (orders, outbox, operation log, queue, provider events,
// faults) share one database, and the outbox and the operation log share its clock.
import { sql } from 'kysely';
import type { Order } from '../domain/order';
import type { OrderReceipt } from '../contract';
import type { Database } from './database';
import { SqlCheckouts } from './checkouts';
import { SqlSends } from './sends';
import { SqlNotificationOutbox } from './notification-outbox';
import { SqlOperationLog } from './operation-log';
import { SqlOrders, type BeforeOrderWrite } from './orders';
import { SqlProviderEventLog } from './provider-event-log';
import { SqlRefundQueue } from './refund-queue';
import { SqlStoreFaults } from './store-faults';
import type {
  AppliedRefund,
  ApplyRefundInput,
  DeliveryConfirmation,
  NewOrder,
  NewOutboxEntry,
  OrderStore,
  OutboxEntry,
  RevertRefundInput,
} from './types';

export interface OrderStoreOptions {
  /** Test seam: runs inside the transaction, after reading the order and before the transaction's first write. */
  beforeOrderWrite?: BeforeOrderWrite;
  /** Reads armed faults (see SqlStoreFaults) through a second connection this opens; off unless given. */
  openFaultConnection?: () => Promise<Database>;
  /** How long a write waits for another connection's lock (SQLite busy_timeout, PostgreSQL lock_timeout). */
  busyTimeoutMs?: number;
}

/** The order store on a SQLite or PostgreSQL database (see database.ts); each call is one transaction. */
export class SqlOrderStore implements OrderStore {
  readonly operations: SqlOperationLog;
  readonly faults: SqlStoreFaults;
  readonly queue: SqlRefundQueue;
  readonly providerEvents: SqlProviderEventLog;
  readonly checkouts: SqlCheckouts;
  readonly sends: SqlSends;
  private readonly orders: SqlOrders;
  private readonly outbox: SqlNotificationOutbox;

  constructor(
    private readonly db: Database,
    options: OrderStoreOptions = {},
  ) {
    this.operations = new SqlOperationLog(db);
    this.faults = new SqlStoreFaults(db, options.openFaultConnection, options.busyTimeoutMs ?? 5000);
    this.queue = new SqlRefundQueue(db);
    this.providerEvents = new SqlProviderEventLog(db);
    this.checkouts = new SqlCheckouts(db);
    this.sends = new SqlSends(db, this.operations);
    this.orders = new SqlOrders(db, this.operations, async (orderId, tx) => {
      await options.beforeOrderWrite?.(orderId, tx);
      await this.faults.beforeOrderWrite(orderId);
    });
    this.outbox = new SqlNotificationOutbox(db, this.operations);
  }

  seedOrder(order: NewOrder): Promise<Order> {
    return this.orders.seedOrder(order);
  }

  getOrder(id: string): Promise<Order | undefined> {
    return this.orders.getOrder(id);
  }

  applyRefund(input: ApplyRefundInput): Promise<OrderReceipt> {
    return this.orders.applyRefund(input);
  }

  revertRefund(input: RevertRefundInput): Promise<OrderReceipt> {
    return this.orders.revertRefund(input);
  }

  appliedRefund(operationId: string): Promise<AppliedRefund | undefined> {
    return this.orders.appliedRefund(operationId);
  }

  claimNotification(entry: NewOutboxEntry): Promise<OutboxEntry> {
    return this.outbox.claimNotification(entry);
  }

  claimHandOver(
    entry: NewOutboxEntry,
    onWireForMs?: number,
  ): Promise<{ claimed: OutboxEntry; ours: boolean; stamp: string | null }> {
    return this.outbox.claimHandOver(entry, onWireForMs);
  }

  markNotificationSending(key: string, onWireForMs?: number): Promise<boolean> {
    return this.outbox.markNotificationSending(key, onWireForMs);
  }

  takeOverNotification(
    key: string,
    since: string,
    rule: { endedAfterMs: number; notBefore?: string; onWireForMs?: number },
  ): Promise<string | null> {
    return this.outbox.takeOverNotification(key, since, rule);
  }

  releaseNotification(key: string, since?: string): Promise<boolean> {
    return this.outbox.releaseNotification(key, since);
  }

  markNotificationSent(
    key: string,
    providerResponse: string,
    audit?: { operationId: string; actor: string },
  ): Promise<OutboxEntry> {
    return this.outbox.markNotificationSent(key, providerResponse, audit);
  }

  confirmNotificationDelivered(key: string, confirmation: DeliveryConfirmation): Promise<OutboxEntry> {
    return this.outbox.confirmNotificationDelivered(key, confirmation);
  }

  getNotification(key: string): Promise<OutboxEntry | undefined> {
    return this.outbox.getNotification(key);
  }

  async ping(): Promise<void> {
    await this.db.one(sql`select 1 as ok`);
  }

  async close(): Promise<void> {
    await this.faults.close();
    await this.db.close();
  }
}
