// Refund requests queued for a scheduled batch instead of started at once. A request's identity
// is its business key (order, operation version): queueing it again changes nothing, queueing a
// different intent under the same key is refused. A batch occurrence takes queued requests in
// order and records, per request, the run it started or why it could not start one.
import { sql, type RawBuilder } from 'kysely';
import { changedIntent, type RefundRequest } from '../domain/refund-request';
import type { Database } from './database';
import { IntentConflictError } from './errors';
import { fromRow, type RowOf } from './rows';

export interface QueuedRequest {
  id: number;
  request: RefundRequest;
  /** Where it came from: `cli`, or `<file>:<line>` for a CSV import. */
  source: string;
  /** queued: waits for a batch; started: a run carries it out; refused: it can never start as it is (see lastError). */
  status: 'queued' | 'started' | 'refused';
  queuedAt: string;
  /** The run it started, and the occurrence that started it. */
  workflowId: string | null;
  startedBy: string | null;
  /** Why the last occurrence that took it could not start it; it stays queued. */
  lastError: string | null;
  attempts: number;
}

type Row = RowOf<Omit<QueuedRequest, 'request'> & RefundRequest> & { started_at: string | null };

const toQueued = ({ started_at: _, ...row }: Row): QueuedRequest => {
  const { id, order_id, amount, currency, reason, requested_by, operation_version, ...rest } = row;
  const request = fromRow({ order_id, amount, currency, reason, requested_by, operation_version });
  return { id, request, ...fromRow(rest) };
};

export class RefundQueue {
  constructor(private readonly db: Database) {}

  /** Queues a validated request; the same request again returns the first (`created: false`). */
  async enqueue(request: RefundRequest, source: string): Promise<{ queued: QueuedRequest; created: boolean }> {
    return this.db.transaction(async (tx) => {
      const found = await tx.one(
        sql<Row>`SELECT * FROM refund_requests WHERE order_id = ${request.orderId} AND operation_version = ${request.operationVersion}`,
      );
      const existing = found && toQueued(found);
      if (existing) {
        const was = changedIntent(existing.request, request);
        if (was)
          throw new IntentConflictError(
            `order ${request.orderId} version ${request.operationVersion} is already queued with ${was}; a changed refund needs a new operation version`,
          );
        return { queued: existing, created: false };
      }
      const row = await tx.one(sql<Row>`
        INSERT INTO refund_requests (order_id, operation_version, amount, currency, reason, requested_by, source, status, queued_at)
        VALUES (${request.orderId}, ${request.operationVersion}, ${request.amount}, ${request.currency}, ${request.reason}, ${request.requestedBy}, ${source}, 'queued', ${new Date().toISOString()})
        RETURNING *`);
      return { queued: toQueued(row!), created: true };
    });
  }

  /** The oldest queued requests, at most `limit`: what one batch occurrence takes. */
  async next(limit: number): Promise<QueuedRequest[]> {
    const rows = await this.db.all(
      sql<Row>`SELECT * FROM refund_requests WHERE status = 'queued' ORDER BY id LIMIT ${limit}`,
    );
    return rows.map(toQueued);
  }

  /** Records the run an occurrence started for a request; a request already started keeps its first record. */
  markStarted(id: number, workflowId: string, occurrenceId: string): Promise<QueuedRequest> {
    return this.updateQueued(
      id,
      sql`status = 'started', workflow_id = ${workflowId}, started_by = ${occurrenceId}, started_at = ${new Date().toISOString()}, last_error = NULL`,
    );
  }

  /** Takes a request out of the queue for good, with why: it can never be started as it is. */
  markRefused(id: number, reason: string): Promise<QueuedRequest> {
    return this.updateQueued(id, sql`status = 'refused', last_error = ${reason.slice(0, 1000)}`);
  }

  /** Keeps a request queued with the reason an occurrence could not start it. */
  markNotStarted(id: number, reason: string): Promise<QueuedRequest> {
    return this.updateQueued(id, sql`last_error = ${reason.slice(0, 1000)}`);
  }

  async list(filter: { status?: QueuedRequest['status']; orderId?: string } = {}): Promise<QueuedRequest[]> {
    const conditions = [sql`1 = 1`];
    if (filter.status !== undefined) conditions.push(sql`status = ${filter.status}`);
    if (filter.orderId !== undefined) conditions.push(sql`order_id = ${filter.orderId}`);
    const rows = await this.db.all(
      sql<Row>`SELECT * FROM refund_requests WHERE ${sql.join(conditions, sql` AND `)} ORDER BY id`,
    );
    return rows.map(toQueued);
  }

  /** Counts an occurrence's take of a still queued request, with what it set; the request as it now stands. */
  private async updateQueued(id: number, set: RawBuilder<unknown>): Promise<QueuedRequest> {
    await this.db.run(
      sql`UPDATE refund_requests SET ${set}, attempts = attempts + 1 WHERE id = ${id} AND status = 'queued'`,
    );
    const row = await this.db.one(sql<Row>`SELECT * FROM refund_requests WHERE id = ${id}`);
    if (!row) throw new Error(`no queued refund request ${id}`);
    return toQueued(row);
  }
}
