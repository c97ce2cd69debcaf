// What the completion gate compares with the provider's word, read in one statement (one snapshot): the order's
// record of the operation's refund, the notice's outbox entry and the operation's audit trail.
import { sql } from 'kysely';
import type { Queryable } from './database';
import { toOutboxEntry, type OutboxRow } from './notification-outbox';
import { toAuditEntry, type AuditRow } from './operation-log';
import { fromRow, type RowOf } from './rows';
import type { AppliedRefund, AuditEntry, OutboxEntry } from './types';

type Prefixed<P extends string, R> = { [C in keyof R & string as `${P}${C}`]: R[C] | null };
type Row = Prefixed<'applied_', RowOf<AppliedRefund>> & Prefixed<'audit_', AuditRow> & Partial<OutboxRow>;

export interface CompletionRecords {
  applied: AppliedRefund | undefined;
  notice: OutboxEntry | undefined;
  /** Oldest first. */
  trail: AuditEntry[];
}

/** One row per audit entry (one, all null, without any), each beside the refund's and the notice's row (null: none). */
export async function completionRecords(
  on: Queryable,
  operationId: string,
  noticeKey: string,
): Promise<CompletionRecords> {
  const rows = await on.all(sql<Row>`
    SELECT r.operation_id AS applied_operation_id, r.order_id AS applied_order_id, r.refund_id AS applied_refund_id,
      r.amount AS applied_amount, r.reverted_by_key AS applied_reverted_by_key,
      a.seq AS audit_seq, a.operation_id AS audit_operation_id, a.at AS audit_at, a.actor AS audit_actor, a.event AS audit_event,
      a.detail AS audit_detail, n.*
    FROM (SELECT 1 AS here) one
    LEFT JOIN order_refunds r ON r.operation_id = ${operationId}
    LEFT JOIN notification_outbox n ON n.key = ${noticeKey}
    LEFT JOIN audit a ON a.operation_id = ${operationId}
    ORDER BY a.seq`);
  const first = rows[0]!;
  const applied =
    first.applied_operation_id === null ? undefined : fromRow(unprefixed<RowOf<AppliedRefund>>(first, 'applied_'));
  const notice = first.key === null || first.key === undefined ? undefined : toOutboxEntry(outboxColumns(first));
  const trail = rows
    .filter((row) => row.audit_seq !== null)
    .map((row) => toAuditEntry(unprefixed<AuditRow>(row, 'audit_')));
  return { applied, notice, trail };
}

/** The columns under `prefix`, without it. */
function unprefixed<R>(row: Row, prefix: string): R {
  const columns = Object.entries(row).filter(([column]) => column.startsWith(prefix));
  return Object.fromEntries(columns.map(([column, value]) => [column.slice(prefix.length), value])) as R;
}

/** The outbox's own columns: every one not under a prefix of the others. */
function outboxColumns(row: Row): OutboxRow {
  const columns = Object.entries(row).filter(([column]) => !/^(applied|audit)_/.test(column));
  return Object.fromEntries(columns) as OutboxRow;
}
