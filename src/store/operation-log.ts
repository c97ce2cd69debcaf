// Each operation's durable record, the attempt ledger and the audit trail, on the order store's database.
import { sql, type RawBuilder } from 'kysely';
import type { RefundReceipt } from '../contract';
import type { Database, Queryable } from './database';
import { IntentConflictError, LaterVersionError, OperationInFlightError } from './errors';
import { carriedAttempt, OpenAttempt } from './attempt-rows';
import { copyToSends, JOINED_SEND, withLaterSend, type JoinedSend } from './refund-sends';
import { fromRow, type RowOf } from './rows';
import { savepoint } from './savepoint';
import type { AttemptSummary } from '../reliability/attempt-ledger';
import type {
  AttemptEnd,
  AttemptRecord,
  AuditEntry,
  NewAttempt,
  NewOperation,
  OperationRecord,
  OperationStatus,
  OperationUpdate,
} from './types';

type OperationRow = RowOf<Omit<OperationRecord, 'request' | 'refund'>> & {
  request_json: string;
  refund_json: string | null;
};

const toOperation = (joined: OperationRow & JoinedSend): OperationRecord => {
  const { request_json, refund_json, ...row } = withLaterSend(joined);
  return {
    ...fromRow(row),
    request: JSON.parse(request_json) as OperationRecord['request'],
    refund: refund_json === null ? null : (JSON.parse(refund_json) as RefundReceipt),
  };
};

/** Each operation with its refund's send record (refund-sends.ts). */
const OPERATIONS = sql`SELECT o.*, ${JOINED_SEND} FROM operations o LEFT JOIN sends s ON s.operation_id = o.operation_id`;

export type AuditRow = RowOf<Omit<AuditEntry, 'detail'>> & { detail: string };

export const toAuditEntry = ({ detail, ...row }: AuditRow): AuditEntry => ({
  ...fromRow(row),
  detail: JSON.parse(detail),
});

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
const IN_FLIGHT = sql`(status IN ('intent', 'unknown', 'rejected') AND requests_sent > COALESCE(proven_absent_through, 0))`;

/**
 * The order's operation with the highest version above `version` in the scope, as a subquery: of given values, or of
 * an outer row's columns.
 */
const laterVersionQuery = (
  orderId: string | RawBuilder<unknown>,
  scope: string | RawBuilder<unknown>,
  version: number | RawBuilder<unknown>,
) =>
  sql<{ operation_id: string }>`
    SELECT operation_id FROM operations WHERE order_id = ${orderId} AND scope = ${scope} AND operation_version > ${version}
    ORDER BY operation_version DESC LIMIT 1`;

/** The order's other operations that forbid a send of the row `o`: a later version in its scope, or one with a request out. */
const LATER_THAN_O = laterVersionQuery(sql`o.order_id`, sql`o.scope`, sql`o.operation_version`);
const IN_FLIGHT_BESIDE_O = sql`
  SELECT operation_id FROM operations WHERE order_id = o.order_id AND operation_id != o.operation_id AND ${IN_FLIGHT} LIMIT 1`;

export class OperationLog {
  constructor(
    private readonly db: Database,
    private readonly now: () => string = () => new Date().toISOString(),
  ) {}

  /** Records the intent, or returns the one there; a changed request hash, or a version below the order's, is refused. */
  async commitIntent(op: NewOperation): Promise<{ record: OperationRecord; created: boolean }> {
    return this.db.transaction(async (tx) => {
      // The operation's row and, for an intent not recorded yet, the order's later version in the scope: one read.
      const { later_operation_id: later, ...found } = (await tx.one(sql<
        Partial<OperationRow> & { later_operation_id: string | null }
      >`
        SELECT o.*, (${laterVersionQuery(op.orderId, op.scope, op.operationVersion)}) AS later_operation_id
        FROM (SELECT 1 AS here) one LEFT JOIN operations o ON o.operation_id = ${op.operationId}`))!;
      const existing = found.operation_id == null ? undefined : (found as OperationRow);
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
      if (later) {
        throw new LaterVersionError(
          `order ${op.orderId} already has operation ${later}; a new operation needs a version above it`,
        );
      }
      const at = this.now();
      const row = await tx.one(sql<OperationRow>`
        INSERT INTO operations (operation_id, order_id, operation_version, scope, request_hash, request_json, status, created_at, created_by, updated_at)
        VALUES (${op.operationId}, ${op.orderId}, ${op.operationVersion}, ${op.scope}, ${op.requestHash}, ${JSON.stringify(op.request)}, 'intent', ${at}, ${op.actor}, ${at})
        RETURNING *`);
      const { requestHash, request } = op;
      await this.audit(op.operationId, op.actor, 'intent_committed', { requestHash, request }, tx);
      return { record: toOperation(row!), created: true };
    });
  }

  async get(operationId: string): Promise<OperationRecord | undefined> {
    const row = await this.db.one(sql<OperationRow>`${OPERATIONS} WHERE o.operation_id = ${operationId}`);
    return row && toOperation(row);
  }

  /** Now (ms since the epoch) by the clock that stamps sends: on PostgreSQL the server's, one clock for all hosts. */
  async clock(on: Queryable = this.db): Promise<number> {
    if (on.dialect === 'sqlite') return Date.parse(this.now());
    const row = await on.one(sql<{ ms: number }>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms`);
    return Number(row!.ms);
  }

  /** Every operation on the order, oldest first, each with whether the order records its refund (`order_refunds`). */
  async forOrder(orderId: string): Promise<{ operation: OperationRecord; refundOnOrder: boolean }[]> {
    const rows = await this.db.all(sql<OperationRow & JoinedSend & { refund_on_order: string | null }>`
      SELECT o.*, ${JOINED_SEND}, r.operation_id AS refund_on_order FROM operations o
      LEFT JOIN sends s ON s.operation_id = o.operation_id LEFT JOIN order_refunds r ON r.operation_id = o.operation_id
      WHERE o.order_id = ${orderId} ORDER BY o.created_at, o.operation_version`);
    return rows.map(({ refund_on_order, ...row }) => ({
      operation: toOperation(row),
      refundOnOrder: refund_on_order !== null,
    }));
  }

  /**
   * Stamps and counts a create request just before it is sent, in the transaction that checks no other send of the
   * order forbids it: `onWireForMs` is how long after its stamp this send can still be on the wire.
   */
  async markSent(operationId: string, actor: string, onWireForMs: number): Promise<OperationRecord> {
    return this.db.transaction(async (tx) => {
      const stamp = await this.clock(tx);
      const at = new Date(stamp).toISOString();
      const until = new Date(stamp + onWireForMs).toISOString();
      // Stamped only where no other operation of the order forbids it (why not is read only then). The bound is the
      // latest over all sends, stamps compared as written (as withLaterSend does): a later send with a shorter timeout
      // does not shorten an earlier one still out. A refused operation asked again becomes an intent again: from here
      // on its send counts like any other.
      const row = await tx.one(sql<OperationRow>`
        UPDATE operations AS o SET first_sent_at = COALESCE(first_sent_at, ${at}), last_sent_at = ${at}, requests_sent = requests_sent + 1,
          off_the_wire_by = CASE WHEN off_the_wire_by > ${until} THEN off_the_wire_by ELSE ${until} END,
          status = CASE WHEN status = 'rejected' THEN 'intent' ELSE status END, updated_at = ${at}
        WHERE o.operation_id = ${operationId} AND NOT EXISTS (${LATER_THAN_O}) AND NOT EXISTS (${IN_FLIGHT_BESIDE_O})
        RETURNING *`);
      if (!row) throw await this.sendRefused(tx, operationId);
      // Dual write: the send's record follows the operation's row (refund-sends.ts).
      await tx.run(copyToSends(operationId));
      await this.audit(operationId, actor, 'refund_request_sent', {}, tx);
      return toOperation(row);
    });
  }

  /** Why markSent stamped nothing, read in its transaction: no such operation, a later version, or a request out. */
  private async sendRefused(tx: Queryable, operationId: string): Promise<Error> {
    const found = await tx.one(sql<{ order_id: string; later: string | null; other: string | null }>`
      SELECT o.order_id, (${LATER_THAN_O}) AS later, (${IN_FLIGHT_BESIDE_O}) AS other
      FROM operations o WHERE o.operation_id = ${operationId}`);
    if (!found) return new Error(`no operation ${operationId}: commit its intent first`);
    const { order_id: orderId, later, other } = found;
    if (later)
      return new LaterVersionError(
        `order ${orderId} has a later operation, ${later}: ${operationId} is never sent after it`,
      );
    if (other)
      return new OperationInFlightError(
        `operation ${other} on order ${orderId} has a request out whose outcome is not settled; ${operationId} waits for it`,
      );
    return new Error(`operation ${operationId} was not stamped, and nothing in its transaction says why`);
  }

  /**
   * A new status and its audit entry in one transaction; a move the current status does not allow changes nothing.
   * `carry`: a write that rides in the same commit once the move is made, behind a savepoint (its refusal undoes it alone).
   */
  async settle<C = never>(
    operationId: string,
    update: OperationUpdate,
    actor: string,
    event: string,
    detail: Record<string, unknown> = {},
    carry?: (tx: Queryable) => Promise<C | undefined>,
  ): Promise<{ record: OperationRecord; applied: boolean; carried?: C }> {
    let tries = 0;
    return this.db.transaction(async (tx) => {
      // The carried write rides the first try only: run again after a serialization failure, the move commits alone.
      const carrying = tries++ === 0 ? carry : undefined;
      const current = await this.row(tx, operationId);
      if (!current) throw new Error(`no operation ${operationId}`);
      const sentSince = update.ifRequestsSent !== undefined && current.requests_sent !== update.ifRequestsSent;
      const applied = REACHABLE_FROM[update.status].includes(current.status) && !sentSince;
      let row = current;
      if (applied) {
        const refund = update.refund ? JSON.stringify(update.refund) : null;
        const absence = update.absenceConfirmedAt ?? null;
        row = (await tx.one(sql<OperationRow>`
          UPDATE operations SET status = ${update.status}, refund_json = COALESCE(${refund}, refund_json), reason = ${update.reason ?? null},
            absence_confirmed_at = COALESCE(${absence}, absence_confirmed_at),
            proven_absent_through = ${absence === null ? sql`proven_absent_through` : sql`requests_sent`}, updated_at = ${this.now()}
          WHERE operation_id = ${operationId}
          RETURNING *`))!;
        await tx.run(copyToSends(operationId));
      }
      const ignored = sentSince ? 'sent again since it was looked up' : `status stays ${current.status}`;
      const entry = {
        status: update.status,
        ...(update.reason && { reason: update.reason }),
        ...detail,
        ...(!applied && { ignored }),
      };
      await this.audit(operationId, actor, event, entry, tx);
      const carried = applied && carrying ? await savepoint(tx, () => carrying(tx)) : undefined;
      // The audit entry leaves the operation's row as it was written (or found) above.
      return { record: toOperation(row), applied, ...(carried !== undefined && { carried }) };
    });
  }

  /** One attempt of a step, its ledger row written in the attempt's own transactions where it can be (OpenAttempt). */
  openAttempt(a: NewAttempt): OpenAttempt {
    return new OpenAttempt(this.db, a, this.now);
  }

  /** An attempt whose write rode in another step's transaction `tx`: its row begun and ended there, as `end` says. */
  carriedAttempt(tx: Queryable, a: NewAttempt, end: AttemptEnd): Promise<AttemptSummary> {
    return carriedAttempt(tx, a, end, this.now());
  }

  /** A step's attempts in one run, oldest first by when each began: a row is written when first needed, so ids need not follow. */
  async attempts(key: string, runId: string): Promise<AttemptRecord[]> {
    const rows = await this.db.all(sql<RowOf<AttemptRecord>>`
      SELECT * FROM attempts WHERE key = ${key} AND run_id = ${runId} ORDER BY started_at, id`);
    return rows.map(fromRow);
  }

  /** Writes an audit entry; in a caller's transaction (`on`) it commits or rolls back with it. */
  async audit(
    operationId: string,
    actor: string,
    event: string,
    detail: Record<string, unknown> = {},
    on: Queryable = this.db,
  ): Promise<void> {
    await on.run(
      sql`INSERT INTO audit (operation_id, at, actor, event, detail) VALUES (${operationId}, ${this.now()}, ${actor}, ${event}, ${JSON.stringify(detail)})`,
    );
  }

  async auditTrail(operationId: string): Promise<AuditEntry[]> {
    const rows = await this.db.all(sql<AuditRow>`SELECT * FROM audit WHERE operation_id = ${operationId} ORDER BY seq`);
    return rows.map(toAuditEntry);
  }

  /** Within a write: the row alone, which counts the sends of both builds (and leaves `sends` unlocked on PostgreSQL). */
  private row(on: Queryable, operationId: string): Promise<OperationRow | undefined> {
    return on.one(sql<OperationRow>`SELECT * FROM operations WHERE operation_id = ${operationId}`);
  }
}
