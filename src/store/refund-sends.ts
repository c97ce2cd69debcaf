// A refund's send record in `sends`, under the key it is sent with, while workers of 1.0 may still keep theirs in the
// operation's row (expand, then contract: docs/store.md). Each write of this build counts in the operation's row,
// which both builds write, and copies it to the send's record in the same transaction; a read takes each field's
// later state of the two, so a send a 1.0 worker recorded since counts.
import { sql, type RawBuilder } from 'kysely';
import { CHECKOUT_REFUND_SCOPE, checkoutOperationId, compensationKey, stepKey } from '../contract';
import type { OperationRecord } from '../contract/receipts';
import type { RowOf } from './rows';

/** What an operation's row holds of its refund's send: 1.0's record, still written. */
export type OperationSendColumns = RowOf<
  Pick<OperationRecord, 'operationId' | 'orderId' | 'scope' | 'updatedAt' | SendField>
> & { refund_json: string | null };
type SendField = 'requestsSent' | 'firstSentAt' | 'lastSentAt' | 'offTheWireBy' | 'provenAbsentThrough';

type SendColumns = RowOf<Pick<OperationRecord, SendField>> & { receipt_json: string | null };
/** The send's record as `sends` holds it, joined to its operation's row (`s`, by operation id: one send each). */
export type JoinedSend = { [C in keyof SendColumns as `send_${C}`]?: SendColumns[C] };

export const JOINED_SEND = sql`s.requests_sent AS send_requests_sent, s.first_sent_at AS send_first_sent_at, s.last_sent_at AS send_last_sent_at,
  s.off_the_wire_by AS send_off_the_wire_by, s.proven_absent_through AS send_proven_absent_through, s.receipt_json AS send_receipt_json`;

/**
 * The key the refund goes to Stripe with, as the workflows derive it: its create_refund step key, or, for a
 * checkout's refund of its charge, the charge's compensation key.
 */
const refundSendKey = (op: Pick<OperationSendColumns, 'operation_id' | 'order_id' | 'scope'>) =>
  op.scope === CHECKOUT_REFUND_SCOPE
    ? compensationKey(stepKey(checkoutOperationId(op.order_id), 'charge_card'))
    : stepKey(op.operation_id, 'create_refund');

/**
 * The statement that sets the send's record to what the operation's row holds (a receipt already there stays: the
 * first answer is the send's); none for an operation never sent and without a refund.
 */
export function copyToSends(op: OperationSendColumns): RawBuilder<unknown> | undefined {
  if (op.requests_sent === 0 && op.refund_json === null) return undefined;
  return sql`
    INSERT INTO sends (key, operation_id, requests_sent, first_sent_at, last_sent_at, off_the_wire_by, proven_absent_through, receipt_json, updated_at)
    VALUES (${refundSendKey(op)}, ${op.operation_id}, ${op.requests_sent}, ${op.first_sent_at}, ${op.last_sent_at}, ${op.off_the_wire_by},
      ${op.proven_absent_through}, ${op.refund_json}, ${op.updated_at})
    ON CONFLICT (key) DO UPDATE SET requests_sent = excluded.requests_sent, first_sent_at = excluded.first_sent_at,
      last_sent_at = excluded.last_sent_at, off_the_wire_by = excluded.off_the_wire_by, proven_absent_through = excluded.proven_absent_through,
      receipt_json = COALESCE(sends.receipt_json, excluded.receipt_json), updated_at = excluded.updated_at`;
}

const later = <T extends string | number>(a: T | null, b: T | null = null) =>
  b === null || (a !== null && a >= b) ? a : b;
const earlier = <T extends string>(a: T | null, b: T | null = null) => (b === null || (a !== null && a <= b) ? a : b);

/**
 * The operation's row with its send's fields at their later state of the two records: a count only grows and a
 * stamp only moves on, whichever build wrote it. The receipt: the operation's refund as it stands (a failure the
 * provider reported since included), else the send's first answer.
 */
export function withLaterSend<Row extends OperationSendColumns>(row: Row & JoinedSend): Row {
  const own = Object.fromEntries(Object.entries(row).filter(([column]) => !column.startsWith('send_'))) as Row;
  return {
    ...own,
    requests_sent: later(row.requests_sent, row.send_requests_sent)!,
    first_sent_at: earlier(row.first_sent_at, row.send_first_sent_at),
    last_sent_at: later(row.last_sent_at, row.send_last_sent_at),
    off_the_wire_by: later(row.off_the_wire_by, row.send_off_the_wire_by),
    proven_absent_through: later(row.proven_absent_through, row.send_proven_absent_through),
    refund_json: row.refund_json ?? row.send_receipt_json ?? null,
  };
}
