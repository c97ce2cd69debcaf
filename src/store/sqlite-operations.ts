// Operations, the attempt ledger and the audit trail, on the order store's SQLite database.
import type Database from 'better-sqlite3';
import type { RefundReceipt } from '../shared';
import { IntentConflictError, LaterVersionError, OperationInFlightError } from './errors';
import type {
  AttemptEnd,
  AttemptRecord,
  AuditEntry,
  NewAttempt,
  NewOperation,
  OperationLog,
  OperationRecord,
  OperationStatus,
  OperationUpdate,
} from './types';

export const OPERATIONS_SCHEMA = `
CREATE TABLE IF NOT EXISTS operations (
  operation_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  operation_version INTEGER NOT NULL,
  scope TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  request_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('intent', 'unknown', 'refunded', 'partial', 'failed', 'rejected', 'completed')),
  refund_json TEXT,
  first_sent_at TEXT,
  last_sent_at TEXT,
  requests_sent INTEGER NOT NULL DEFAULT 0,
  absence_confirmed_at TEXT,
  proven_absent_through INTEGER,
  reason TEXT,
  created_at TEXT NOT NULL,
  created_by TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS operations_order_id ON operations(order_id);
CREATE TABLE IF NOT EXISTS attempts (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL,
  step TEXT NOT NULL,
  operation_id TEXT NOT NULL,
  workflow_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  transport_requests INTEGER NOT NULL DEFAULT 0,
  outcome TEXT,
  certainty TEXT,
  reason TEXT,
  retry_after_ms INTEGER,
  next_delay_ms INTEGER,
  provider_request_id TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS attempts_key_run ON attempts(key, run_id);
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  operation_id TEXT NOT NULL,
  at TEXT NOT NULL,
  actor TEXT NOT NULL,
  event TEXT NOT NULL,
  detail TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS audit_operation_id ON audit(operation_id);
`;

interface OperationRow {
  operation_id: string;
  order_id: string;
  operation_version: number;
  scope: string;
  request_hash: string;
  request_json: string;
  status: OperationStatus;
  refund_json: string | null;
  first_sent_at: string | null;
  last_sent_at: string | null;
  requests_sent: number;
  absence_confirmed_at: string | null;
  proven_absent_through: number | null;
  reason: string | null;
  created_at: string;
  created_by: string;
  updated_at: string;
}

interface AttemptRow {
  id: number;
  key: string;
  step: string;
  operation_id: string;
  workflow_id: string;
  run_id: string;
  attempt: number;
  started_at: string;
  finished_at: string | null;
  transport_requests: number;
  outcome: string | null;
  certainty: string | null;
  reason: string | null;
  retry_after_ms: number | null;
  next_delay_ms: number | null;
  provider_request_id: string | null;
}

function toOperation(row: OperationRow): OperationRecord {
  return {
    operationId: row.operation_id,
    orderId: row.order_id,
    operationVersion: row.operation_version,
    scope: row.scope,
    requestHash: row.request_hash,
    request: JSON.parse(row.request_json) as OperationRecord['request'],
    status: row.status,
    refund: row.refund_json === null ? null : (JSON.parse(row.refund_json) as RefundReceipt),
    firstSentAt: row.first_sent_at,
    lastSentAt: row.last_sent_at,
    requestsSent: row.requests_sent,
    absenceConfirmedAt: row.absence_confirmed_at,
    provenAbsentThrough: row.proven_absent_through,
    reason: row.reason,
    createdAt: row.created_at,
    createdBy: row.created_by,
    updatedAt: row.updated_at,
  };
}

function toAttempt(row: AttemptRow): AttemptRecord {
  return {
    id: row.id,
    key: row.key,
    step: row.step,
    operationId: row.operation_id,
    workflowId: row.workflow_id,
    runId: row.run_id,
    attempt: row.attempt,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    transportRequests: row.transport_requests,
    outcome: row.outcome,
    certainty: row.certainty,
    reason: row.reason,
    retryAfterMs: row.retry_after_ms,
    nextDelayMs: row.next_delay_ms,
    providerRequestId: row.provider_request_id,
  };
}

/** The statuses each status may be reached from: a late or repeated writer never moves an operation backwards. */
const REACHABLE_FROM: Record<OperationStatus, OperationStatus[]> = {
  // Absence proven: a refused operation that was sent after all becomes an intent again.
  intent: ['intent', 'unknown', 'rejected'],
  unknown: ['intent', 'unknown', 'rejected'],
  rejected: ['intent', 'rejected'],
  refunded: ['intent', 'unknown', 'rejected', 'refunded'],
  partial: ['intent', 'unknown', 'rejected', 'refunded', 'partial'],
  completed: ['refunded', 'completed'],
  // A refund can fail after it was accepted, even after its run completed.
  failed: ['intent', 'unknown', 'rejected', 'refunded', 'partial', 'completed', 'failed'],
};

/** Sent, and not proven absent since, with no receipt: its request may still be out, or may have taken effect. */
const IN_FLIGHT = `(status IN ('intent', 'unknown', 'rejected') AND requests_sent > COALESCE(proven_absent_through, 0))`;

export class SqliteOperationLog implements OperationLog {
  constructor(
    private readonly db: Database.Database,
    private readonly now: () => string = () => new Date().toISOString(),
  ) {}

  async commitIntent(op: NewOperation): Promise<{ record: OperationRecord; created: boolean }> {
    return this.db.transaction(() => {
      const existing = this.row(op.operationId);
      if (existing) {
        if (existing.request_hash !== op.requestHash) {
          const was = JSON.parse(existing.request_json) as OperationRecord['request'];
          throw new IntentConflictError(
            `operation ${op.operationId} was first requested as ${was.amount} ${was.currency} (${was.reason}); ` +
              `this request (${op.request.amount} ${op.request.currency}, ${op.request.reason}) is a changed intent and needs a new operation version`,
          );
        }
        return { record: toOperation(existing), created: false };
      }
      const later = this.laterVersion(op.orderId, op.scope, op.operationVersion);
      if (later) {
        throw new LaterVersionError(`order ${op.orderId} already has operation ${later}; a new operation needs a version above it`);
      }
      const at = this.now();
      this.db
        .prepare(
          `INSERT INTO operations (operation_id, order_id, operation_version, scope, request_hash, request_json, status, created_at, created_by, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, 'intent', ?, ?, ?)`,
        )
        .run(op.operationId, op.orderId, op.operationVersion, op.scope, op.requestHash, JSON.stringify(op.request), at, op.actor, at);
      this.insertAudit(op.operationId, op.actor, 'intent_committed', { requestHash: op.requestHash, request: op.request });
      return { record: toOperation(this.row(op.operationId)!), created: true };
    }).immediate();
  }

  async get(operationId: string): Promise<OperationRecord | undefined> {
    const row = this.row(operationId);
    return row && toOperation(row);
  }

  async forOrder(orderId: string): Promise<OperationRecord[]> {
    return this.db
      .prepare<[string], OperationRow>('SELECT * FROM operations WHERE order_id = ? ORDER BY created_at, operation_version')
      .all(orderId)
      .map(toOperation);
  }

  async markSent(operationId: string, actor: string): Promise<OperationRecord> {
    // Immediate: the checks and the stamp hold the write lock together, so no other send slips in between.
    return this.db.transaction(() => {
      const current = this.row(operationId);
      if (!current) throw new Error(`no operation ${operationId}: commit its intent first`);
      const later = this.laterVersion(current.order_id, current.scope, current.operation_version);
      if (later) throw new LaterVersionError(`order ${current.order_id} has a later operation, ${later}: ${operationId} is never sent after it`);
      const other = this.db
        .prepare<[string, string], { operation_id: string }>(`SELECT operation_id FROM operations WHERE order_id = ? AND operation_id != ? AND ${IN_FLIGHT} LIMIT 1`)
        .get(current.order_id, operationId);
      if (other) {
        throw new OperationInFlightError(`operation ${other.operation_id} on order ${current.order_id} has a request out whose outcome is not settled; ${operationId} waits for it`);
      }
      const at = this.now();
      // A refused operation asked again becomes an intent again: from here on its send counts like any other.
      this.db
        .prepare(
          `UPDATE operations SET first_sent_at = COALESCE(first_sent_at, ?), last_sent_at = ?, requests_sent = requests_sent + 1,
             status = CASE WHEN status = 'rejected' THEN 'intent' ELSE status END, updated_at = ?
           WHERE operation_id = ?`,
        )
        .run(at, at, at, operationId);
      this.insertAudit(operationId, actor, 'refund_request_sent', {});
      return toOperation(this.row(operationId)!);
    }).immediate();
  }

  async settle(operationId: string, update: OperationUpdate, actor: string, event: string, detail: Record<string, unknown> = {}): Promise<{ record: OperationRecord; applied: boolean }> {
    return this.db.transaction(() => {
      const current = this.row(operationId);
      if (!current) throw new Error(`no operation ${operationId}`);
      const sentSince = update.ifRequestsSent !== undefined && current.requests_sent !== update.ifRequestsSent;
      const applied = REACHABLE_FROM[update.status].includes(current.status) && !sentSince;
      if (applied) {
        this.db
          .prepare(
            `UPDATE operations SET status = @status, refund_json = COALESCE(@refund, refund_json), reason = @reason,
               absence_confirmed_at = COALESCE(@absence, absence_confirmed_at),
               proven_absent_through = CASE WHEN @absence IS NULL THEN proven_absent_through ELSE requests_sent END, updated_at = @at
             WHERE operation_id = @id`,
          )
          .run({
            id: operationId,
            status: update.status,
            refund: update.refund ? JSON.stringify(update.refund) : null,
            reason: update.reason ?? null,
            absence: update.absenceConfirmedAt ?? null,
            at: this.now(),
          });
      }
      const outcome = applied ? {} : { ignored: sentSince ? 'sent again since it was looked up' : `status stays ${current.status}` };
      this.insertAudit(operationId, actor, event, { status: update.status, ...(update.reason && { reason: update.reason }), ...detail, ...outcome });
      return { record: toOperation(this.row(operationId)!), applied };
    })();
  }

  async beginAttempt(a: NewAttempt): Promise<number> {
    const result = this.db
      .prepare('INSERT INTO attempts (key, step, operation_id, workflow_id, run_id, attempt, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(a.key, a.step, a.operationId, a.workflowId, a.runId, a.attempt, this.now());
    return Number(result.lastInsertRowid);
  }

  async finishAttempt(id: number, end: AttemptEnd): Promise<void> {
    this.db
      .prepare(
        `UPDATE attempts SET finished_at = @at, transport_requests = @transportRequests, outcome = @outcome, certainty = @certainty,
           reason = @reason, retry_after_ms = @retryAfterMs, next_delay_ms = @nextDelayMs, provider_request_id = @providerRequestId
         WHERE id = @id`,
      )
      .run({ id, at: this.now(), ...end });
  }

  async attempts(key: string, runId: string): Promise<AttemptRecord[]> {
    return this.db
      .prepare<[string, string], AttemptRow>('SELECT * FROM attempts WHERE key = ? AND run_id = ? ORDER BY id')
      .all(key, runId)
      .map(toAttempt);
  }

  async audit(operationId: string, actor: string, event: string, detail: Record<string, unknown> = {}): Promise<void> {
    this.insertAudit(operationId, actor, event, detail);
  }

  async auditTrail(operationId: string): Promise<AuditEntry[]> {
    return this.db
      .prepare<[string], { seq: number; operation_id: string; at: string; actor: string; event: string; detail: string }>(
        'SELECT * FROM audit WHERE operation_id = ? ORDER BY seq',
      )
      .all(operationId)
      .map((r) => ({ seq: r.seq, operationId: r.operation_id, at: r.at, actor: r.actor, event: r.event, detail: JSON.parse(r.detail) }));
  }

  /** Writes an audit entry; inside a caller's transaction it commits or rolls back with it. */
  insertAudit(operationId: string, actor: string, event: string, detail: Record<string, unknown>): void {
    this.db
      .prepare('INSERT INTO audit (operation_id, at, actor, event, detail) VALUES (?, ?, ?, ?, ?)')
      .run(operationId, this.now(), actor, event, JSON.stringify(detail));
  }

  /** The order's operation with the highest version above `version`, if any. */
  private laterVersion(orderId: string, scope: string, version: number): string | undefined {
    return this.db
      .prepare<[string, string, number], { operation_id: string }>(
        'SELECT operation_id FROM operations WHERE order_id = ? AND scope = ? AND operation_version > ? ORDER BY operation_version DESC LIMIT 1',
      )
      .get(orderId, scope, version)?.operation_id;
  }

  private row(operationId: string): OperationRow | undefined {
    return this.db.prepare<[string], OperationRow>('SELECT * FROM operations WHERE operation_id = ?').get(operationId);
  }
}
