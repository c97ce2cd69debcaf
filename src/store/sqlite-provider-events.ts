// Provider events (Stripe webhooks) as the receiver took them: one row per event id, so a
// redelivered event is recognised, with where it was handed on and when.
import type Database from 'better-sqlite3';
import type { NewProviderEvent, ProviderEventLog, ProviderEventRecord } from './types';

export const PROVIDER_EVENTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS provider_events (
  event_id TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  operation_id TEXT,
  refund_id TEXT,
  refund_status TEXT,
  amount INTEGER,
  currency TEXT,
  created INTEGER NOT NULL,
  received_at TEXT NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 1,
  handed_to TEXT,
  handed_at TEXT,
  outcome TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS provider_events_operation ON provider_events(operation_id);
`;

interface Row {
  event_id: string;
  type: string;
  operation_id: string | null;
  refund_id: string | null;
  refund_status: string | null;
  amount: number | null;
  currency: string | null;
  created: number;
  received_at: string;
  deliveries: number;
  handed_to: string | null;
  handed_at: string | null;
  outcome: string | null;
}

const toRecord = (r: Row): ProviderEventRecord => ({
  eventId: r.event_id,
  type: r.type,
  operationId: r.operation_id,
  refundId: r.refund_id,
  refundStatus: r.refund_status,
  amount: r.amount,
  currency: r.currency,
  created: r.created,
  receivedAt: r.received_at,
  deliveries: r.deliveries,
  handedTo: r.handed_to,
  handedAt: r.handed_at,
  outcome: r.outcome,
});

export class SqliteProviderEventLog implements ProviderEventLog {
  constructor(private readonly db: Database.Database) {}

  async receive(e: NewProviderEvent): Promise<{ record: ProviderEventRecord; first: boolean }> {
    return this.db.transaction(() => {
      const { changes } = this.db
        .prepare(
          'INSERT OR IGNORE INTO provider_events (event_id, type, operation_id, refund_id, refund_status, amount, currency, created, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        )
        .run(e.eventId, e.type, e.operationId, e.refundId, e.refundStatus, e.amount, e.currency, e.created, new Date().toISOString());
      if (changes === 0) this.db.prepare('UPDATE provider_events SET deliveries = deliveries + 1 WHERE event_id = ?').run(e.eventId);
      return { record: this.require(e.eventId), first: changes === 1 };
    })();
  }

  async handed(eventId: string, to: string | null, outcome: string): Promise<ProviderEventRecord> {
    this.db.prepare('UPDATE provider_events SET handed_to = ?, handed_at = ?, outcome = ? WHERE event_id = ?').run(to, new Date().toISOString(), outcome, eventId);
    return this.require(eventId);
  }

  async get(eventId: string): Promise<ProviderEventRecord | undefined> {
    const row = this.db.prepare<[string], Row>('SELECT * FROM provider_events WHERE event_id = ?').get(eventId);
    return row && toRecord(row);
  }

  async forOperation(operationId: string): Promise<ProviderEventRecord[]> {
    return this.db.prepare<[string], Row>('SELECT * FROM provider_events WHERE operation_id = ? ORDER BY created, received_at').all(operationId).map(toRecord);
  }

  private require(eventId: string): ProviderEventRecord {
    return toRecord(this.db.prepare<[string], Row>('SELECT * FROM provider_events WHERE event_id = ?').get(eventId)!);
  }
}
