// Provider events (Stripe webhooks) as the receiver took them: one row per event id, so a
// redelivered event is recognised, with where it was handed on and when.
import { sql } from 'kysely';
import type { Database, Queryable } from './database';
import { fromRow, type RowOf } from './rows';

export interface ProviderEventRecord {
  eventId: string;
  type: string;
  operationId: string | null;
  refundId: string | null;
  refundStatus: string | null;
  /** The refund's amount and currency as the signed event gave them (null for events kept before they were recorded). */
  amount: number | null;
  currency: string | null;
  /** The event's own time (unix seconds), as the provider stamped it. */
  created: number;
  receivedAt: string;
  /** How many times it arrived (the provider delivers at least once). */
  deliveries: number;
  /** The run it was handed to as a Signal, and what became of it. */
  handedTo: string | null;
  handedAt: string | null;
  outcome: string | null;
}

export type NewProviderEvent = Pick<
  ProviderEventRecord,
  'eventId' | 'type' | 'operationId' | 'refundId' | 'refundStatus' | 'amount' | 'currency' | 'created'
>;

type Row = RowOf<ProviderEventRecord>;

export class ProviderEventLog {
  constructor(private readonly db: Database) {}

  /** Records an event by its id; `first` is false for a redelivery. */
  async receive(e: NewProviderEvent): Promise<{ record: ProviderEventRecord; first: boolean }> {
    return this.db.transaction(async (tx) => {
      const inserted = await tx.run(sql`
        INSERT INTO provider_events (event_id, type, operation_id, refund_id, refund_status, amount, currency, created, received_at)
        VALUES (${e.eventId}, ${e.type}, ${e.operationId}, ${e.refundId}, ${e.refundStatus}, ${e.amount}, ${e.currency}, ${e.created}, ${new Date().toISOString()})
        ON CONFLICT (event_id) DO NOTHING`);
      if (inserted === 0)
        await tx.run(sql`UPDATE provider_events SET deliveries = deliveries + 1 WHERE event_id = ${e.eventId}`);
      return { record: (await this.get(e.eventId, tx))!, first: inserted === 1 };
    });
  }

  /** Records the run it was handed to (null for none) and what became of it. */
  async handed(eventId: string, to: string | null, outcome: string): Promise<ProviderEventRecord> {
    await this.db.run(
      sql`UPDATE provider_events SET handed_to = ${to}, handed_at = ${new Date().toISOString()}, outcome = ${outcome} WHERE event_id = ${eventId}`,
    );
    const record = await this.get(eventId);
    if (!record) throw new Error(`no provider event ${eventId}`);
    return record;
  }

  async get(eventId: string, on: Queryable = this.db): Promise<ProviderEventRecord | undefined> {
    const row = await on.one(sql<Row>`SELECT * FROM provider_events WHERE event_id = ${eventId}`);
    return row && fromRow(row);
  }

  async forOperation(operationId: string): Promise<ProviderEventRecord[]> {
    const rows = await this.db.all(
      sql<Row>`SELECT * FROM provider_events WHERE operation_id = ${operationId} ORDER BY created, received_at`,
    );
    return rows.map(fromRow);
  }
}
