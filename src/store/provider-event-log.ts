// Provider events (Stripe webhooks) as the receiver took them: one row per event id, so a
// redelivered event is recognised, with where it was handed on and when.
import { sql } from 'kysely';
import type { Database } from './database';
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

  /** Records an event by its id, or counts a redelivery of it (`first` false): one statement, so one of two wins. */
  async receive(e: NewProviderEvent): Promise<{ record: ProviderEventRecord; first: boolean }> {
    const row = await this.db.one(sql<Row>`
      INSERT INTO provider_events (event_id, type, operation_id, refund_id, refund_status, amount, currency, created, received_at)
      VALUES (${e.eventId}, ${e.type}, ${e.operationId}, ${e.refundId}, ${e.refundStatus}, ${e.amount}, ${e.currency}, ${e.created}, ${new Date().toISOString()})
      ON CONFLICT (event_id) DO UPDATE SET deliveries = provider_events.deliveries + 1
      RETURNING *`);
    return { record: fromRow(row!), first: row!.deliveries === 1 };
  }

  /** Records the run it was handed to (null for none) and what became of it. */
  async handed(eventId: string, to: string | null, outcome: string): Promise<ProviderEventRecord> {
    const row = await this.db.one(
      sql<Row>`UPDATE provider_events SET handed_to = ${to}, handed_at = ${new Date().toISOString()}, outcome = ${outcome} WHERE event_id = ${eventId} RETURNING *`,
    );
    if (!row) throw new Error(`no provider event ${eventId}`);
    return fromRow(row);
  }

  async get(eventId: string): Promise<ProviderEventRecord | undefined> {
    const row = await this.db.one(sql<Row>`SELECT * FROM provider_events WHERE event_id = ${eventId}`);
    return row && fromRow(row);
  }

  async forOperation(operationId: string): Promise<ProviderEventRecord[]> {
    const rows = await this.db.all(
      sql<Row>`SELECT * FROM provider_events WHERE operation_id = ${operationId} ORDER BY created, received_at`,
    );
    return rows.map(fromRow);
  }
}
