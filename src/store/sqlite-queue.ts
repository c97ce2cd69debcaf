// Refund requests queued for a scheduled batch instead of started at once. A request's identity
// is its business key (order, operation version): queueing it again changes nothing, queueing a
// different intent under the same key is refused. A batch occurrence takes queued requests in
// order and records, per request, the run it started or why it could not start one.
import type Database from 'better-sqlite3';
import { changedIntent, type RefundRequest } from '../shared';
import { IntentConflictError } from './errors';
import type { QueuedRequest, RefundQueue } from './types';

export const QUEUE_SCHEMA = `
CREATE TABLE IF NOT EXISTS refund_requests (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  order_id TEXT NOT NULL,
  operation_version INTEGER NOT NULL,
  amount INTEGER NOT NULL CHECK (amount > 0),
  currency TEXT NOT NULL,
  reason TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  source TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued', 'started', 'refused')),
  queued_at TEXT NOT NULL,
  workflow_id TEXT,
  started_by TEXT,
  started_at TEXT,
  last_error TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  UNIQUE (order_id, operation_version)
) STRICT;
`;

interface Row {
  id: number;
  order_id: string;
  operation_version: number;
  amount: number;
  currency: string;
  reason: RefundRequest['reason'];
  requested_by: string;
  source: string;
  status: QueuedRequest['status'];
  queued_at: string;
  workflow_id: string | null;
  started_by: string | null;
  last_error: string | null;
  attempts: number;
}

const toQueued = (r: Row): QueuedRequest => ({
  id: r.id,
  request: { orderId: r.order_id, amount: r.amount, currency: r.currency, reason: r.reason, requestedBy: r.requested_by, operationVersion: r.operation_version },
  source: r.source,
  status: r.status,
  queuedAt: r.queued_at,
  workflowId: r.workflow_id,
  startedBy: r.started_by,
  lastError: r.last_error,
  attempts: r.attempts,
});

export class SqliteRefundQueue implements RefundQueue {
  constructor(private readonly db: Database.Database) {}

  /** Queues a validated request; the same request again returns the first (`created: false`). */
  async enqueue(request: RefundRequest, source: string): Promise<{ queued: QueuedRequest; created: boolean }> {
    return this.db.transaction(() => {
      const existing = this.byKey(request.orderId, request.operationVersion);
      if (existing) {
        const was = changedIntent(existing.request, request);
        if (was) throw new IntentConflictError(`order ${request.orderId} version ${request.operationVersion} is already queued with ${was}; a changed refund needs a new operation version`);
        return { queued: existing, created: false };
      }
      const { lastInsertRowid } = this.db
        .prepare(
          `INSERT INTO refund_requests (order_id, operation_version, amount, currency, reason, requested_by, source, status, queued_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)`,
        )
        .run(request.orderId, request.operationVersion, request.amount, request.currency, request.reason, request.requestedBy, source, new Date().toISOString());
      return { queued: this.byId(Number(lastInsertRowid))!, created: true };
    })();
  }

  /** The oldest queued requests, at most `limit`: what one batch occurrence takes. */
  async next(limit: number): Promise<QueuedRequest[]> {
    return this.db.prepare<[number], Row>("SELECT * FROM refund_requests WHERE status = 'queued' ORDER BY id LIMIT ?").all(limit).map(toQueued);
  }

  /** Records the run an occurrence started for a request; a request already started keeps its first record. */
  async markStarted(id: number, workflowId: string, occurrenceId: string): Promise<QueuedRequest> {
    this.db
      .prepare("UPDATE refund_requests SET status = 'started', workflow_id = ?, started_by = ?, started_at = ?, last_error = NULL, attempts = attempts + 1 WHERE id = ? AND status = 'queued'")
      .run(workflowId, occurrenceId, new Date().toISOString(), id);
    return this.require(id);
  }

  /** Takes a request out of the queue for good, with why: it can never be started as it is. */
  async markRefused(id: number, reason: string): Promise<QueuedRequest> {
    this.db.prepare("UPDATE refund_requests SET status = 'refused', last_error = ?, attempts = attempts + 1 WHERE id = ? AND status = 'queued'").run(reason.slice(0, 1000), id);
    return this.require(id);
  }

  /** Keeps a request queued with the reason an occurrence could not start it. */
  async markNotStarted(id: number, reason: string): Promise<QueuedRequest> {
    this.db.prepare("UPDATE refund_requests SET last_error = ?, attempts = attempts + 1 WHERE id = ? AND status = 'queued'").run(reason.slice(0, 1000), id);
    return this.require(id);
  }

  async list(filter: { status?: QueuedRequest['status']; orderId?: string } = {}): Promise<QueuedRequest[]> {
    const rows = this.db
      .prepare<[string | null, string | null, string | null, string | null], Row>('SELECT * FROM refund_requests WHERE (? IS NULL OR status = ?) AND (? IS NULL OR order_id = ?) ORDER BY id')
      .all(filter.status ?? null, filter.status ?? null, filter.orderId ?? null, filter.orderId ?? null);
    return rows.map(toQueued);
  }

  private require(id: number): QueuedRequest {
    const q = this.byId(id);
    if (!q) throw new Error(`no queued refund request ${id}`);
    return q;
  }

  private byId(id: number): QueuedRequest | undefined {
    const row = this.db.prepare<[number], Row>('SELECT * FROM refund_requests WHERE id = ?').get(id);
    return row && toQueued(row);
  }

  private byKey(orderId: string, version: number): QueuedRequest | undefined {
    const row = this.db.prepare<[string, number], Row>('SELECT * FROM refund_requests WHERE order_id = ? AND operation_version = ?').get(orderId, version);
    return row && toQueued(row);
  }
}
