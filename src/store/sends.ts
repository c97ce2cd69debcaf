// Send records keyed by step key, read and written by the send protocol (src/saga/send.ts): each write is one
// transaction, with the operation's audit entry in it.
import { sql } from 'kysely';
import type { Database } from './database';
import type { OperationLog } from './operation-log';
import { fromRow, type RowOf } from './rows';

export interface KeyedSendRecord<R = unknown> {
  key: string;
  operationId: string;
  requestsSent: number;
  firstSentAt: string | null;
  lastSentAt: string | null;
  /** The latest any request of this key can still be on the wire, by each sender's own bound. */
  offTheWireBy: string | null;
  /** The count of requests proven to have made nothing (reconciliation, or a refusal that proves it). */
  provenAbsentThrough: number | null;
  receipt: R | null;
}

type SendRow = RowOf<Omit<KeyedSendRecord, 'receipt'>> & { receipt_json: string | null; updated_at: string };

const toRecord = <R>({ receipt_json, updated_at: _, ...row }: SendRow): KeyedSendRecord<R> => ({
  ...fromRow(row),
  receipt: receipt_json === null ? null : (JSON.parse(receipt_json) as R),
});

export class SqlSends {
  constructor(
    private readonly db: Database,
    /** The operation log's clock and audit trail, which every send's write uses. */
    private readonly log: Pick<OperationLog, 'clock' | 'audit'>,
  ) {}

  /** The key's record; one nothing was sent under yet reads as empty. */
  async get<R>(key: string, operationId: string): Promise<KeyedSendRecord<R>> {
    const row = await this.db.one(sql<SendRow>`SELECT * FROM sends WHERE key = ${key}`);
    return row
      ? toRecord<R>(row)
      : {
          key,
          operationId,
          requestsSent: 0,
          firstSentAt: null,
          lastSentAt: null,
          offTheWireBy: null,
          provenAbsentThrough: null,
          receipt: null,
        };
  }

  /** Stamps a request about to go out, by the store's clock: it can be on the wire until `onWireForMs` after. */
  async stamp(key: string, operationId: string, actor: string, onWireForMs: number): Promise<KeyedSendRecord> {
    return this.db.transaction(async (tx) => {
      const stamp = await this.log.clock(tx);
      const at = new Date(stamp).toISOString();
      const until = new Date(stamp + onWireForMs).toISOString();
      // The latest over all sends: a later send with a shorter timeout does not shorten an earlier one still out.
      const row = await tx.one(sql<SendRow>`
        INSERT INTO sends (key, operation_id, requests_sent, first_sent_at, last_sent_at, off_the_wire_by, updated_at)
        VALUES (${key}, ${operationId}, 1, ${at}, ${at}, ${until}, ${at})
        ON CONFLICT (key) DO UPDATE SET requests_sent = sends.requests_sent + 1, last_sent_at = ${at},
          off_the_wire_by = CASE WHEN sends.off_the_wire_by > ${until} THEN sends.off_the_wire_by ELSE ${until} END, updated_at = ${at}
        RETURNING *`);
      await this.log.audit(operationId, actor, 'request_sent', { key }, tx);
      return toRecord(row!);
    });
  }

  /** Records the receipt (a receipt already there stays: the first answer is the send's). */
  async settle<R>(key: string, receipt: R, actor: string, detail: Record<string, unknown> = {}): Promise<void> {
    await this.db.transaction(async (tx) => {
      const row = await tx.one(sql<SendRow>`
        UPDATE sends SET receipt_json = COALESCE(receipt_json, ${JSON.stringify(receipt)}), updated_at = ${new Date().toISOString()}
        WHERE key = ${key} RETURNING *`);
      if (!row) throw new Error(`no send under ${key}: stamp it first`);
      await this.log.audit(row.operation_id, actor, 'receipt_recorded', { key, ...detail }, tx);
    });
  }

  /** Records that the first `through` requests made nothing, unless another went out since they were counted. */
  async provenAbsent(key: string, through: number, actor: string, reason: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const row = await tx.one(sql<SendRow>`
        UPDATE sends SET proven_absent_through = ${through}, updated_at = ${new Date().toISOString()}
        WHERE key = ${key} AND requests_sent = ${through} AND receipt_json IS NULL RETURNING *`);
      if (row) await this.log.audit(row.operation_id, actor, 'proven_absent', { key, through, reason }, tx);
      return row !== undefined;
    });
  }
}
