// A refund's send record in `sends`, under the key it is sent with, while workers of 1.0 may still keep theirs in the
// operation's row (expand, then contract: docs/store.md). Each write of this build counts in the operation's row,
// which both builds write, and copies it to the send's record in the same transaction; a read takes each field's
// later state of the two, so a send a 1.0 worker recorded since counts.
import { sql } from 'kysely';
import { CHECKOUT_REFUND_SCOPE } from '../contract';
import type { OperationRecord } from '../contract/receipts';
import type { RowOf } from './rows';

type SendColumns = RowOf<
  Pick<OperationRecord, 'requestsSent' | 'firstSentAt' | 'lastSentAt' | 'offTheWireBy' | 'provenAbsentThrough'>
>;
/** The send's record as `sends` holds it, joined to its operation's row (`s`, by operation id: one send each). */
export type JoinedSend = { [C in keyof SendColumns as `send_${C}`]?: SendColumns[C] } & {
  send_receipt_json?: string | null;
};

export const JOINED_SEND = sql`s.requests_sent AS send_requests_sent, s.first_sent_at AS send_first_sent_at, s.last_sent_at AS send_last_sent_at,
  s.off_the_wire_by AS send_off_the_wire_by, s.proven_absent_through AS send_proven_absent_through, s.receipt_json AS send_receipt_json`;

/**
 * The statement that sets the send's record of each operation (or of one) to what its row holds (a receipt already
 * there stays: the first answer is the send's); none for an operation never sent and without a refund. Its key is
 * the one the refund goes to Stripe with, as the workflows derive it (contract's stepKey, compensationKey): its
 * create_refund step key, or, for a checkout's refund of its charge, the charge's compensation key.
 */
export const copyToSends = (operationId?: string) => sql`
  INSERT INTO sends (key, operation_id, requests_sent, first_sent_at, last_sent_at, off_the_wire_by, proven_absent_through, receipt_json, updated_at)
  SELECT CASE WHEN scope = ${CHECKOUT_REFUND_SCOPE} THEN 'checkout:' || order_id || ':charge_card:compensate' ELSE operation_id || ':create_refund' END,
    operation_id, requests_sent, first_sent_at, last_sent_at, off_the_wire_by, proven_absent_through, refund_json, updated_at
  FROM operations WHERE ${operationId === undefined ? sql`` : sql`operation_id = ${operationId} AND`} (requests_sent > 0 OR refund_json IS NOT NULL)
  ON CONFLICT (key) DO UPDATE SET requests_sent = excluded.requests_sent, first_sent_at = excluded.first_sent_at,
    last_sent_at = excluded.last_sent_at, off_the_wire_by = excluded.off_the_wire_by, proven_absent_through = excluded.proven_absent_through,
    receipt_json = COALESCE(sends.receipt_json, excluded.receipt_json), updated_at = excluded.updated_at`;

const later = <T extends string | number>(a: T | null, b: T | null = null) =>
  b === null || (a !== null && a >= b) ? a : b;
const earlier = <T extends string>(a: T | null, b: T | null = null) => (b === null || (a !== null && a <= b) ? a : b);

/**
 * The operation's row with its send's fields at their later state of the two records: a count only grows and a
 * stamp only moves on, whichever build wrote it. The receipt: the operation's refund as it stands (a failure the
 * provider reported since included), else the send's first answer.
 */
export function withLaterSend<Row extends SendColumns & { refund_json: string | null }>(row: Row & JoinedSend): Row {
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
