import Database from 'better-sqlite3';
import type { Order, OrderReceipt, OrderStatus } from '../shared';
import { IntentConflictError, InvalidOperationError, OrderNotFoundError, RefundExceedsOrderError, VersionConflictError } from './errors';
import { FAULTS_SCHEMA, SqliteStoreFaults } from './sqlite-faults';
import { OPERATIONS_SCHEMA, SqliteOperationLog } from './sqlite-operations';
import { QUEUE_SCHEMA, SqliteRefundQueue } from './sqlite-queue';
import { PROVIDER_EVENTS_SCHEMA, SqliteProviderEventLog } from './sqlite-provider-events';
import {
  type AppliedRefund,
  type ApplyRefundInput,
  type NewOrder,
  type NewOutboxEntry,
  type OrderStore,
  type OutboxEntry,
  type RevertRefundInput,
} from './types';

export interface SqliteOrderStoreOptions {
  /** Test seam: runs inside the transaction, between reading the order and the conditional update. */
  beforeOrderWrite?: (orderId: string) => void;
  /** Reads armed faults (see SqliteStoreFaults); off unless asked for. */
  faults?: boolean;
  /** How long a write waits for another connection's lock before failing with SQLITE_BUSY. */
  busyTimeoutMs?: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS orders (
  id TEXT PRIMARY KEY,
  payment_intent_id TEXT NOT NULL,
  customer_email TEXT NOT NULL,
  currency TEXT NOT NULL,
  amount INTEGER NOT NULL CHECK (amount > 0),
  refunded_amount INTEGER NOT NULL CHECK (refunded_amount >= 0 AND refunded_amount <= amount),
  status TEXT NOT NULL CHECK (status IN ('paid', 'partially_refunded', 'refunded')),
  version INTEGER NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS order_refunds (
  operation_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL REFERENCES orders(id),
  refund_id TEXT NOT NULL,
  amount INTEGER NOT NULL CHECK (amount > 0),
  prior_refunded_amount INTEGER NOT NULL,
  prior_status TEXT NOT NULL,
  applied_version INTEGER NOT NULL,
  applied_at TEXT NOT NULL,
  reverted_by_key TEXT UNIQUE,
  reverted_at TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS order_refunds_order_id ON order_refunds(order_id);
CREATE TABLE IF NOT EXISTS notification_outbox (
  key TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('refund_notice', 'refund_correction', 'digest')),
  recipient TEXT NOT NULL,
  subject TEXT NOT NULL,
  message_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'sent')),
  sending_since TEXT,
  attempts INTEGER NOT NULL,
  provider_response TEXT,
  created_at TEXT NOT NULL,
  sent_at TEXT
) STRICT;
`;

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

// Checked by code, not instanceof: the native addon keeps the SqliteError class (and realm) of its first load, which jest's per-file sandboxes do not share.
function isBusySnapshot(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'SQLITE_BUSY_SNAPSHOT';
}

/** The order store on one SQLite file. Each call is one synchronous transaction, so it never interleaves within a process. */
export class SqliteOrderStore implements OrderStore {
  readonly operations: SqliteOperationLog;
  readonly faults: SqliteStoreFaults;
  readonly queue: SqliteRefundQueue;
  readonly providerEvents: SqliteProviderEventLog;
  private readonly db: Database.Database;
  private readonly beforeOrderWrite: (orderId: string) => void;

  constructor(filename: string, options: SqliteOrderStoreOptions = {}) {
    this.db = new Database(filename);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
    this.db.pragma('foreign_keys = ON');
    this.db.exec(SCHEMA + OPERATIONS_SCHEMA + FAULTS_SCHEMA + QUEUE_SCHEMA + PROVIDER_EVENTS_SCHEMA);
    // Databases made by earlier versions lack these columns.
    this.addColumn('notification_outbox', 'sending_since', 'TEXT');
    this.addColumn('operations', 'proven_absent_through', 'INTEGER');
    this.addColumn('provider_events', 'amount', 'INTEGER');
    this.addColumn('provider_events', 'currency', 'TEXT');
    this.allowDigests();
    this.operations = new SqliteOperationLog(this.db);
    this.faults = new SqliteStoreFaults(this.db, filename, options.faults ?? false);
    this.queue = new SqliteRefundQueue(this.db);
    this.providerEvents = new SqliteProviderEventLog(this.db);
    const hook = options.beforeOrderWrite ?? (() => undefined);
    this.beforeOrderWrite = (orderId) => {
      hook(orderId);
      this.faults.beforeOrderWrite(orderId);
    };
  }

  async seedOrder(order: NewOrder): Promise<Order> {
    requireMinorUnits('order amount', order.amount);
    return this.transaction(() => {
      const existing = this.orderRow(order.id);
      if (existing) {
        const problems = differences(toOrder(existing), { ...toOrder(existing), ...order }, [
          'paymentIntentId',
          'customerEmail',
          'currency',
          'amount',
        ]);
        if (problems.length > 0) {
          throw new IntentConflictError(`order ${order.id} already exists with different fields (${problems.join('; ')}); it was not overwritten`);
        }
        return toOrder(existing);
      }
      this.db
        .prepare(
          `INSERT INTO orders (id, payment_intent_id, customer_email, currency, amount, refunded_amount, status, version, updated_at)
           VALUES (?, ?, ?, ?, ?, 0, 'paid', 1, ?)`,
        )
        .run(order.id, order.paymentIntentId, order.customerEmail, order.currency, order.amount, now());
      return toOrder(this.requireOrder(order.id));
    });
  }

  async getOrder(id: string): Promise<Order | undefined> {
    const row = this.orderRow(id);
    return row && toOrder(row);
  }

  async applyRefund(input: ApplyRefundInput): Promise<OrderReceipt> {
    requireMinorUnits('refund amount', input.amount);
    return this.optimistic(() => {
      const applied = this.refundRow(input.operationId);
      if (applied) {
        const problems = differences(
          { orderId: applied.order_id, refundId: applied.refund_id, amount: applied.amount },
          { orderId: input.orderId, refundId: input.refundId, amount: input.amount },
          ['orderId', 'refundId', 'amount'],
        );
        if (problems.length > 0) {
          throw new IntentConflictError(`operation ${input.operationId} was already applied with different parameters (${problems.join('; ')})`);
        }
        return receipt(this.requireOrder(input.orderId), false);
      }
      const order = this.requireOrder(input.orderId);
      const refunded = order.refunded_amount + input.amount;
      if (refunded > order.amount) {
        throw new RefundExceedsOrderError(
          `refund of ${input.amount} ${order.currency} for order ${order.id} exceeds what is left to refund ` +
            `(${order.amount - order.refunded_amount} of ${order.amount}); nothing was changed`,
        );
      }
      const updated = this.updateOrder(order, refunded);
      this.db
        .prepare(
          `INSERT INTO order_refunds (operation_id, order_id, refund_id, amount, prior_refunded_amount, prior_status, applied_version, applied_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(input.operationId, order.id, input.refundId, input.amount, order.refunded_amount, order.status, updated.version, now());
      this.operations.insertAudit(input.operationId, input.actor ?? 'unknown', 'order_updated', {
        refundId: input.refundId,
        amount: input.amount,
        refundedAmount: updated.refunded_amount,
        version: updated.version,
      });
      return receipt(updated, true);
    });
  }

  async revertRefund(input: RevertRefundInput): Promise<OrderReceipt> {
    return this.optimistic(() => {
      const applied = this.refundRow(input.operationId);
      if (!applied || applied.order_id !== input.orderId) {
        throw new InvalidOperationError(`operation ${input.operationId} was never applied to order ${input.orderId}, so there is nothing to revert`);
      }
      const other = this.db
        .prepare<[string], { operation_id: string }>('SELECT operation_id FROM order_refunds WHERE reverted_by_key = ?')
        .get(input.compensationKey);
      if (other && other.operation_id !== input.operationId) {
        throw new IntentConflictError(`compensation key ${input.compensationKey} already reverted operation ${other.operation_id}, not ${input.operationId}`);
      }
      // Already reverted (by this key or another): reverting twice would take the money off twice.
      if (applied.reverted_by_key !== null) return receipt(this.requireOrder(input.orderId), false);

      const order = this.requireOrder(input.orderId);
      // A later write moved the order on: take only this operation's amount off instead of clobbering it with the old snapshot.
      const refunded = order.version === applied.applied_version ? applied.prior_refunded_amount : order.refunded_amount - applied.amount;
      if (refunded < 0) {
        throw new InvalidOperationError(`reverting operation ${input.operationId} would leave order ${order.id} with a negative refunded amount`);
      }
      const status = order.version === applied.applied_version ? applied.prior_status : statusFor(refunded, order.amount);
      const updated = this.updateOrder(order, refunded, status);
      this.db
        .prepare('UPDATE order_refunds SET reverted_by_key = ?, reverted_at = ? WHERE operation_id = ?')
        .run(input.compensationKey, now(), input.operationId);
      this.operations.insertAudit(input.operationId, input.actor ?? 'unknown', 'order_reverted', {
        compensationKey: input.compensationKey,
        refundedAmount: updated.refunded_amount,
        version: updated.version,
      });
      return receipt(updated, true);
    });
  }

  async claimNotification(entry: NewOutboxEntry): Promise<OutboxEntry> {
    return this.transaction(() => {
      const existing = this.outboxRow(entry.key);
      if (existing) {
        const problems = differences(toOutboxEntry(existing), { ...toOutboxEntry(existing), ...entry }, [
          'orderId',
          'kind',
          'recipient',
          'subject',
          'messageId',
        ]);
        if (problems.length > 0) {
          throw new IntentConflictError(`notification ${entry.key} was already claimed with different content (${problems.join('; ')})`);
        }
        this.db.prepare('UPDATE notification_outbox SET attempts = attempts + 1 WHERE key = ?').run(entry.key);
      } else {
        this.db
          .prepare(
            `INSERT INTO notification_outbox (key, order_id, kind, recipient, subject, message_id, status, attempts, created_at)
             VALUES (?, ?, ?, ?, ?, ?, 'pending', 1, ?)`,
          )
          .run(entry.key, entry.orderId, entry.kind, entry.recipient, entry.subject, entry.messageId, now());
      }
      return this.requireOutbox(entry.key);
    });
  }

  async markNotificationSending(key: string): Promise<boolean> {
    return this.transaction(() => {
      this.requireOutbox(key);
      // The conditional update is the lock: of two attempts racing here, exactly one changes the row.
      const result = this.db.prepare("UPDATE notification_outbox SET status = 'sending', sending_since = ? WHERE key = ? AND status = 'pending'").run(now(), key);
      return result.changes === 1;
    });
  }

  async takeOverNotification(key: string, since: string, stamp: string): Promise<boolean> {
    return this.transaction(() => {
      this.requireOutbox(key);
      const result = this.db.prepare("UPDATE notification_outbox SET sending_since = ? WHERE key = ? AND status = 'sending' AND sending_since = ?").run(stamp, key, since);
      return result.changes === 1;
    });
  }

  async releaseNotification(key: string): Promise<boolean> {
    return this.transaction(() => {
      this.requireOutbox(key);
      const result = this.db.prepare("UPDATE notification_outbox SET status = 'pending', sending_since = NULL WHERE key = ? AND status = 'sending'").run(key);
      return result.changes === 1;
    });
  }

  async markNotificationSent(key: string, providerResponse: string, audit?: { operationId: string; actor: string }): Promise<OutboxEntry> {
    return this.transaction(() => {
      // Only the first acceptance is recorded: a later one would hide when the customer was really mailed.
      // A pending entry is taken too: the acceptance is proof enough, whatever the row said.
      const { changes } = this.db
        .prepare("UPDATE notification_outbox SET status = 'sent', provider_response = ?, sent_at = ? WHERE key = ? AND status IN ('pending', 'sending')")
        .run(providerResponse, now(), key);
      const entry = this.requireOutbox(key);
      if (changes === 1 && audit) {
        this.operations.insertAudit(audit.operationId, audit.actor, 'notification_sent', { key, kind: entry.kind, messageId: entry.messageId });
      }
      return entry;
    });
  }

  async appliedRefund(operationId: string): Promise<AppliedRefund | undefined> {
    const row = this.refundRow(operationId);
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
    const row = this.outboxRow(key);
    return row && toOutboxEntry(row);
  }

  async close(): Promise<void> {
    this.faults.close();
    if (this.db.open) this.db.close();
  }

  /** Outboxes made before digests existed refuse the kind in a CHECK, which SQLite cannot alter: the table is rebuilt. */
  private allowDigests(): void {
    const { sql } = this.db.prepare<[], { sql: string }>("SELECT sql FROM sqlite_master WHERE name = 'notification_outbox'").get()!;
    if (sql.includes("'digest'")) return;
    const columns = 'key, order_id, kind, recipient, subject, message_id, status, sending_since, attempts, provider_response, created_at, sent_at';
    this.transaction(() => {
      this.db.exec('ALTER TABLE notification_outbox RENAME TO notification_outbox_old');
      this.db.exec(SCHEMA);
      this.db.exec(`INSERT INTO notification_outbox (${columns}) SELECT ${columns} FROM notification_outbox_old; DROP TABLE notification_outbox_old`);
    });
  }

  private addColumn(table: string, column: string, type: string): void {
    const columns = this.db.prepare<[], { name: string }>(`PRAGMA table_info(${table})`).all();
    if (!columns.some((c) => c.name === column)) this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
  }

  private transaction<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }

  /** A deferred transaction: when another connection commits after our read, SQLite refuses our write with SQLITE_BUSY_SNAPSHOT. */
  private optimistic<T>(fn: () => T): T {
    try {
      return this.transaction(fn);
    } catch (err) {
      if (isBusySnapshot(err)) throw new VersionConflictError('another writer changed the order after it was read; reload and try again');
      throw err;
    }
  }

  private updateOrder(order: OrderRow, refundedAmount: number, status = statusFor(refundedAmount, order.amount)): OrderRow {
    this.beforeOrderWrite(order.id);
    const result = this.db
      .prepare('UPDATE orders SET refunded_amount = ?, status = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?')
      .run(refundedAmount, status, now(), order.id, order.version);
    if (result.changes === 0) {
      throw new VersionConflictError(`order ${order.id} changed after it was read at version ${order.version}; reload and try again`);
    }
    return { ...order, refunded_amount: refundedAmount, status, version: order.version + 1 };
  }

  private orderRow(id: string): OrderRow | undefined {
    return this.db.prepare<[string], OrderRow>('SELECT * FROM orders WHERE id = ?').get(id);
  }

  private requireOrder(id: string): OrderRow {
    const row = this.orderRow(id);
    if (!row) throw new OrderNotFoundError(`order ${id} does not exist`);
    return row;
  }

  private refundRow(operationId: string): RefundRow | undefined {
    return this.db.prepare<[string], RefundRow>('SELECT * FROM order_refunds WHERE operation_id = ?').get(operationId);
  }

  private outboxRow(key: string): OutboxRow | undefined {
    return this.db.prepare<[string], OutboxRow>('SELECT * FROM notification_outbox WHERE key = ?').get(key);
  }

  private requireOutbox(key: string): OutboxEntry {
    const row = this.outboxRow(key);
    if (!row) throw new Error(`no notification with key ${key} in the outbox`);
    return toOutboxEntry(row);
  }
}

function now(): string {
  return new Date().toISOString();
}
