import { sql } from 'kysely';
import type { Order, OrderStatus } from '../domain/order';
import type { OrderReceipt } from '../contract';
import type { Database, Queryable } from './database';
import { IntentConflictError, InvalidOperationError, OrderNotFoundError, RefundExceedsOrderError, VersionConflictError } from './errors';
import { SqlOperationLog } from './operation-log';
import { SqlProviderEventLog } from './provider-event-log';
import { SqlRefundQueue } from './refund-queue';
import { SqlStoreFaults } from './store-faults';
import {
  type AppliedRefund,
  type ApplyRefundInput,
  type DeliveryConfirmation,
  type NewOrder,
  type NewOutboxEntry,
  type OrderStore,
  type OutboxEntry,
  type RevertRefundInput,
} from './types';

export interface OrderStoreOptions {
  /** Test seam: runs inside the transaction, between reading the order and the conditional update. */
  beforeOrderWrite?: (orderId: string, tx: Queryable) => Promise<void>;
  /** Reads armed faults (see SqlStoreFaults) through a second connection this opens; off unless given. */
  openFaultConnection?: () => Promise<Database>;
  /** How long a write waits for another connection's lock (SQLite busy_timeout, PostgreSQL lock_timeout). */
  busyTimeoutMs?: number;
}

interface OrderRow {
  id: string;
  payment_intent_id: string;
  customer_email: string;
  currency: string;
  amount: number;
  refunded_amount: number;
  status: OrderStatus;
  version: number;
}

interface RefundRow {
  operation_id: string;
  order_id: string;
  refund_id: string;
  amount: number;
  prior_refunded_amount: number;
  prior_status: OrderStatus;
  applied_version: number;
  reverted_by_key: string | null;
}

interface OutboxRow {
  key: string;
  order_id: string;
  kind: OutboxEntry['kind'];
  recipient: string;
  subject: string;
  message_id: string;
  status: OutboxEntry['status'];
  sending_since: string | null;
  attempts: number;
  provider_response: string | null;
  created_at: string;
  sent_at: string | null;
}

function toOrder(row: OrderRow): Order {
  return {
    id: row.id,
    paymentIntentId: row.payment_intent_id,
    customerEmail: row.customer_email,
    currency: row.currency,
    amount: row.amount,
    refundedAmount: row.refunded_amount,
    status: row.status,
    version: row.version,
  };
}

function toOutboxEntry(row: OutboxRow): OutboxEntry {
  return {
    key: row.key,
    orderId: row.order_id,
    kind: row.kind,
    recipient: row.recipient,
    subject: row.subject,
    messageId: row.message_id,
    status: row.status,
    sendingSince: row.sending_since,
    attempts: row.attempts,
    providerResponse: row.provider_response,
    createdAt: row.created_at,
    sentAt: row.sent_at,
  };
}

function receipt(row: OrderRow, changed: boolean): OrderReceipt {
  return { orderId: row.id, status: row.status, refundedAmount: row.refunded_amount, version: row.version, changed };
}

function statusFor(refundedAmount: number, amount: number): OrderStatus {
  if (refundedAmount === 0) return 'paid';
  return refundedAmount < amount ? 'partially_refunded' : 'refunded';
}

function requireMinorUnits(what: string, value: number): void {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOperationError(`${what} must be a positive whole number of minor units, got ${value}`);
  }
}

function differences<T extends object>(stored: T, wanted: T, fields: (keyof T)[]): string[] {
  return fields
    .filter((f) => stored[f] !== wanted[f])
    .map((f) => `${String(f)}: stored ${JSON.stringify(stored[f])}, got ${JSON.stringify(wanted[f])}`);
}

/** The order store on a SQLite or PostgreSQL database (see database.ts); each call is one transaction. */
export class SqlOrderStore implements OrderStore {
  readonly operations: SqlOperationLog;
  readonly faults: SqlStoreFaults;
  readonly queue: SqlRefundQueue;
  readonly providerEvents: SqlProviderEventLog;

  constructor(
    private readonly db: Database,
    private readonly options: OrderStoreOptions = {},
  ) {
    this.operations = new SqlOperationLog(db);
    this.faults = new SqlStoreFaults(db, options.openFaultConnection, options.busyTimeoutMs ?? 5000);
    this.queue = new SqlRefundQueue(db);
    this.providerEvents = new SqlProviderEventLog(db);
  }

  async seedOrder(order: NewOrder): Promise<Order> {
    requireMinorUnits('order amount', order.amount);
    return this.db.transaction(async (tx) => {
      const existing = await orderRow(tx, order.id);
      if (existing) {
        const problems = differences(toOrder(existing), { ...toOrder(existing), ...order }, ['paymentIntentId', 'customerEmail', 'currency', 'amount']);
        if (problems.length > 0) {
          throw new IntentConflictError(`order ${order.id} already exists with different fields (${problems.join('; ')}); it was not overwritten`);
        }
        return toOrder(existing);
      }
      await tx.run(sql`
        INSERT INTO orders (id, payment_intent_id, customer_email, currency, amount, refunded_amount, status, version, updated_at)
        VALUES (${order.id}, ${order.paymentIntentId}, ${order.customerEmail}, ${order.currency}, ${order.amount}, 0, 'paid', 1, ${now()})`);
      return toOrder(await requireOrder(tx, order.id));
    });
  }

  async getOrder(id: string): Promise<Order | undefined> {
    const row = await orderRow(this.db, id);
    return row && toOrder(row);
  }

  async applyRefund(input: ApplyRefundInput): Promise<OrderReceipt> {
    requireMinorUnits('refund amount', input.amount);
    return this.db.transaction(
      async (tx) => {
        const applied = await refundRow(tx, input.operationId);
        if (applied) {
          const problems = differences(
            { orderId: applied.order_id, refundId: applied.refund_id, amount: applied.amount },
            { orderId: input.orderId, refundId: input.refundId, amount: input.amount },
            ['orderId', 'refundId', 'amount'],
          );
          if (problems.length > 0) {
            throw new IntentConflictError(`operation ${input.operationId} was already applied with different parameters (${problems.join('; ')})`);
          }
          return receipt(await requireOrder(tx, input.orderId), false);
        }
        const order = await requireOrder(tx, input.orderId);
        const refunded = order.refunded_amount + input.amount;
        if (refunded > order.amount) {
          throw new RefundExceedsOrderError(
            `refund of ${input.amount} ${order.currency} for order ${order.id} exceeds what is left to refund ` +
              `(${order.amount - order.refunded_amount} of ${order.amount}); nothing was changed`,
          );
        }
        const updated = await this.updateOrder(tx, order, refunded);
        await tx.run(sql`
          INSERT INTO order_refunds (operation_id, order_id, refund_id, amount, prior_refunded_amount, prior_status, applied_version, applied_at)
          VALUES (${input.operationId}, ${order.id}, ${input.refundId}, ${input.amount}, ${order.refunded_amount}, ${order.status}, ${updated.version}, ${now()})`);
        await this.operations.insertAudit(tx, input.operationId, input.actor ?? 'unknown', 'order_updated', {
          refundId: input.refundId,
          amount: input.amount,
          refundedAmount: updated.refunded_amount,
          version: updated.version,
        });
        return receipt(updated, true);
      },
      { optimistic: true },
    );
  }

  async revertRefund(input: RevertRefundInput): Promise<OrderReceipt> {
    return this.db.transaction(
      async (tx) => {
        const applied = await refundRow(tx, input.operationId);
        if (!applied || applied.order_id !== input.orderId) {
          throw new InvalidOperationError(`operation ${input.operationId} was never applied to order ${input.orderId}, so there is nothing to revert`);
        }
        const other = await tx.one(sql<{ operation_id: string }>`SELECT operation_id FROM order_refunds WHERE reverted_by_key = ${input.compensationKey}`);
        if (other && other.operation_id !== input.operationId) {
          throw new IntentConflictError(`compensation key ${input.compensationKey} already reverted operation ${other.operation_id}, not ${input.operationId}`);
        }
        // Already reverted (by this key or another): reverting twice would take the money off twice.
        if (applied.reverted_by_key !== null) return receipt(await requireOrder(tx, input.orderId), false);

        const order = await requireOrder(tx, input.orderId);
        // A later write moved the order on: take only this operation's amount off instead of clobbering it with the old snapshot.
        const refunded = order.version === applied.applied_version ? applied.prior_refunded_amount : order.refunded_amount - applied.amount;
        if (refunded < 0) {
          throw new InvalidOperationError(`reverting operation ${input.operationId} would leave order ${order.id} with a negative refunded amount`);
        }
        const status = order.version === applied.applied_version ? applied.prior_status : statusFor(refunded, order.amount);
        const updated = await this.updateOrder(tx, order, refunded, status);
        await tx.run(sql`UPDATE order_refunds SET reverted_by_key = ${input.compensationKey}, reverted_at = ${now()} WHERE operation_id = ${input.operationId}`);
        await this.operations.insertAudit(tx, input.operationId, input.actor ?? 'unknown', 'order_reverted', {
          compensationKey: input.compensationKey,
          refundedAmount: updated.refunded_amount,
          version: updated.version,
        });
        return receipt(updated, true);
      },
      { optimistic: true },
    );
  }

  async claimNotification(entry: NewOutboxEntry): Promise<OutboxEntry> {
    return this.db.transaction(async (tx) => {
      const existing = await outboxRow(tx, entry.key);
      if (existing) {
        const problems = differences(toOutboxEntry(existing), { ...toOutboxEntry(existing), ...entry }, ['orderId', 'kind', 'recipient', 'subject', 'messageId']);
        if (problems.length > 0) {
          throw new IntentConflictError(`notification ${entry.key} was already claimed with different content (${problems.join('; ')})`);
        }
        await tx.run(sql`UPDATE notification_outbox SET attempts = attempts + 1 WHERE key = ${entry.key}`);
      } else {
        await tx.run(sql`
          INSERT INTO notification_outbox (key, order_id, kind, recipient, subject, message_id, status, attempts, created_at)
          VALUES (${entry.key}, ${entry.orderId}, ${entry.kind}, ${entry.recipient}, ${entry.subject}, ${entry.messageId}, 'pending', 1, ${await this.stamp(tx)})`);
      }
      return requireOutbox(tx, entry.key);
    });
  }

  async markNotificationSending(key: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await requireOutbox(tx, key);
      // The conditional update is the lock: of two attempts racing here, exactly one changes the row.
      return (await tx.run(sql`UPDATE notification_outbox SET status = 'sending', sending_since = ${await this.stamp(tx)} WHERE key = ${key} AND status = 'pending'`)) === 1;
    });
  }

  async takeOverNotification(key: string, since: string, rule: { endedAfterMs: number; notBefore?: string }): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await requireOutbox(tx, key);
      // Its age by the clock that stamped it, read in the transaction that re-stamps it: no host's clock decides.
      const at = await this.operations.clock(tx);
      if (at - Date.parse(since) < rule.endedAfterMs) return false;
      // A new stamp, never equal to the one taken over: what was judged of that hand-over never covers this one.
      const stamp = new Date(Math.max(at, Date.parse(since) + 1, rule.notBefore ? Date.parse(rule.notBefore) : 0)).toISOString();
      return (await tx.run(sql`UPDATE notification_outbox SET sending_since = ${stamp} WHERE key = ${key} AND status = 'sending' AND sending_since = ${since}`)) === 1;
    });
  }

  async releaseNotification(key: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await requireOutbox(tx, key);
      return (await tx.run(sql`UPDATE notification_outbox SET status = 'pending', sending_since = NULL WHERE key = ${key} AND status = 'sending'`)) === 1;
    });
  }

  async markNotificationSent(key: string, providerResponse: string, audit?: { operationId: string; actor: string }): Promise<OutboxEntry> {
    return this.db.transaction(async (tx) => {
      // Only the first acceptance is recorded: a later one would hide when the customer was really mailed.
      // A pending entry is taken too: the acceptance is proof enough, whatever the row said.
      const changes = await tx.run(
        sql`UPDATE notification_outbox SET status = 'sent', provider_response = ${providerResponse}, sent_at = ${await this.stamp(tx)} WHERE key = ${key} AND status IN ('pending', 'sending')`,
      );
      const entry = await requireOutbox(tx, key);
      if (changes === 1 && audit) {
        await this.operations.insertAudit(tx, audit.operationId, audit.actor, 'notification_sent', { key, kind: entry.kind, messageId: entry.messageId });
      }
      return entry;
    });
  }

  async confirmNotificationDelivered(key: string, confirmation: DeliveryConfirmation): Promise<OutboxEntry> {
    return this.db.transaction(async (tx) => {
      // Where the server's answer would be, the person's word, so that no one takes it for the server's.
      const response = `delivery confirmed by ${confirmation.by}: ${confirmation.reason}`;
      const changes = await tx.run(sql`UPDATE notification_outbox SET status = 'sent', provider_response = ${response}, sent_at = ${now()} WHERE key = ${key} AND status = 'sending'`);
      const entry = await requireOutbox(tx, key);
      if (changes === 1) {
        const { by: confirmedBy, reason, operationId, actor } = confirmation;
        await this.operations.insertAudit(tx, operationId, actor, 'notification_sent', { key, kind: entry.kind, messageId: entry.messageId, confirmedBy, reason });
      }
      return entry;
    });
  }

  async appliedRefund(operationId: string): Promise<AppliedRefund | undefined> {
    const row = await refundRow(this.db, operationId);
    return (
      row && {
        operationId: row.operation_id,
        orderId: row.order_id,
        refundId: row.refund_id,
        amount: row.amount,
        revertedByKey: row.reverted_by_key,
      }
    );
  }

  async getNotification(key: string): Promise<OutboxEntry | undefined> {
    const row = await outboxRow(this.db, key);
    return row && toOutboxEntry(row);
  }

  async close(): Promise<void> {
    await this.faults.close();
    await this.db.close();
  }

  /** The outbox's stamps, by the clock send stamps use (the database server's on PostgreSQL): hand-overs by different hosts compare. */
  private async stamp(tx: Queryable): Promise<string> {
    return new Date(await this.operations.clock(tx)).toISOString();
  }

  private async updateOrder(tx: Queryable, order: OrderRow, refundedAmount: number, status = statusFor(refundedAmount, order.amount)): Promise<OrderRow> {
    await this.options.beforeOrderWrite?.(order.id, tx);
    await this.faults.beforeOrderWrite(order.id);
    const changed = await tx.run(
      sql`UPDATE orders SET refunded_amount = ${refundedAmount}, status = ${status}, version = version + 1, updated_at = ${now()} WHERE id = ${order.id} AND version = ${order.version}`,
    );
    if (changed === 0) {
      throw new VersionConflictError(`order ${order.id} changed after it was read at version ${order.version}; reload and try again`);
    }
    return { ...order, refunded_amount: refundedAmount, status, version: order.version + 1 };
  }
}

function orderRow(on: Queryable, id: string): Promise<OrderRow | undefined> {
  return on.one(sql<OrderRow>`SELECT * FROM orders WHERE id = ${id}`);
}

async function requireOrder(on: Queryable, id: string): Promise<OrderRow> {
  const row = await orderRow(on, id);
  if (!row) throw new OrderNotFoundError(`order ${id} does not exist`);
  return row;
}

function refundRow(on: Queryable, operationId: string): Promise<RefundRow | undefined> {
  return on.one(sql<RefundRow>`SELECT * FROM order_refunds WHERE operation_id = ${operationId}`);
}

function outboxRow(on: Queryable, key: string): Promise<OutboxRow | undefined> {
  return on.one(sql<OutboxRow>`SELECT * FROM notification_outbox WHERE key = ${key}`);
}

async function requireOutbox(on: Queryable, key: string): Promise<OutboxEntry> {
  const row = await outboxRow(on, key);
  if (!row) throw new Error(`no notification with key ${key} in the outbox`);
  return toOutboxEntry(row);
}

function now(): string {
  return new Date().toISOString();
}
