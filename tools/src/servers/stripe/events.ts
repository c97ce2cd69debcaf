// Events and webhook endpoints of the local Stripe, kept in its SQLite file: an event is written
// in the same transaction as the change it reports, with one delivery per endpoint that listens
// to its type, so a change is never without its event and an event never without its deliveries.
import { createHmac, randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { newId, unixNow } from './api';

export const EVENTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS webhook_endpoints (
  id TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  enabled_events TEXT NOT NULL,
  created INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL,
  object_id TEXT NOT NULL,
  json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  event_id TEXT NOT NULL,
  endpoint_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_ms INTEGER NOT NULL,
  last_status INTEGER,
  last_error TEXT,
  delivered_at TEXT,
  PRIMARY KEY (event_id, endpoint_id)
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (status, next_attempt_ms);
CREATE TABLE IF NOT EXISTS refund_transitions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  refund_id TEXT NOT NULL,
  to_status TEXT NOT NULL,
  failure_reason TEXT,
  due_ms INTEGER NOT NULL,
  done INTEGER NOT NULL DEFAULT 0
);
`;

/** The refund events the server emits; an endpoint listening to `*` gets them all. */
export const EVENT_TYPES = ['refund.created', 'refund.updated', 'refund.failed', 'charge.refund.updated'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface WebhookEndpointObject {
  id: string;
  object: 'webhook_endpoint';
  url: string;
  enabled_events: string[];
  status: 'enabled';
  livemode: false;
  created: number;
  /** Returned when the endpoint is created, as Stripe does. */
  secret?: string;
}

export interface EventObject {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  data: { object: unknown; previous_attributes?: Record<string, unknown> };
  livemode: false;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: EventType;
}

export interface Delivery {
  eventId: string;
  endpointId: string;
  type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: string | null;
}

/** The `Stripe-Signature` header, as Stripe computes it: HMAC-SHA256 of `<t>.<payload>` with the endpoint's secret. */
export function signatureHeader(payload: string, secret: string, timestamp: number): string {
  const v1 = createHmac('sha256', secret).update(`${timestamp}.${payload}`, 'utf8').digest('hex');
  return `t=${timestamp},v1=${v1}`;
}

export function createEventLog(db: Database.Database) {
  const listens = (enabled: string[], type: string) => enabled.includes('*') || enabled.includes(type);
  return {
    addEndpoint(url: string, enabledEvents: string[]): WebhookEndpointObject {
      const endpoint = {
        id: newId('we'),
        url,
        secret: `whsec_${randomBytes(24).toString('hex')}`,
        enabled_events: enabledEvents,
        created: unixNow(),
      };
      db.prepare('INSERT INTO webhook_endpoints (id, url, secret, enabled_events, created) VALUES (?, ?, ?, ?, ?)').run(
        endpoint.id,
        endpoint.url,
        endpoint.secret,
        JSON.stringify(enabledEvents),
        endpoint.created,
      );
      return { object: 'webhook_endpoint', status: 'enabled', livemode: false, ...endpoint };
    },
    endpoints(): (WebhookEndpointObject & { secret: string })[] {
      return db
        .prepare<[], { id: string; url: string; secret: string; enabled_events: string; created: number }>(
          'SELECT * FROM webhook_endpoints ORDER BY created, id',
        )
        .all()
        .map((r) => ({
          id: r.id,
          object: 'webhook_endpoint',
          url: r.url,
          secret: r.secret,
          enabled_events: JSON.parse(r.enabled_events) as string[],
          status: 'enabled',
          livemode: false,
          created: r.created,
        }));
    },
    /**
     * The endpoint configured for `url` (the local stack's receiver), with the signing secret the
     * receiver was given: created, or its secret and events brought up to date; with no secret, removed.
     */
    configureEndpoint(url: string, secret: string | null): void {
      db.transaction(() => {
        if (secret === null) return void db.prepare('DELETE FROM webhook_endpoints WHERE url = ?').run(url);
        const updated = db
          .prepare(`UPDATE webhook_endpoints SET secret = ?, enabled_events = '["*"]' WHERE url = ?`)
          .run(secret, url).changes;
        if (updated === 0) {
          db.prepare(
            `INSERT INTO webhook_endpoints (id, url, secret, enabled_events, created) VALUES (?, ?, ?, '["*"]', ?)`,
          ).run(newId('we'), url, secret, unixNow());
        }
      })();
    },
    deleteEndpoint(id: string): boolean {
      return db.prepare('DELETE FROM webhook_endpoints WHERE id = ?').run(id).changes === 1;
    },

    /** Writes an event and its deliveries; call inside the transaction of the change it reports. */
    emit(
      type: EventType,
      object: { id: string },
      request: { id: string | null; idempotencyKey: string | null },
      previous?: Record<string, unknown>,
    ): EventObject {
      const targets = this.endpoints().filter((e) => listens(e.enabled_events, type));
      const event: EventObject = {
        id: newId('evt'),
        object: 'event',
        api_version: '2024-06-20',
        created: unixNow(),
        data: { object, ...(previous && { previous_attributes: previous }) },
        livemode: false,
        pending_webhooks: targets.length,
        request: { id: request.id, idempotency_key: request.idempotencyKey },
        type,
      };
      db.prepare('INSERT INTO events (id, type, object_id, json) VALUES (?, ?, ?, ?)').run(
        event.id,
        type,
        object.id,
        JSON.stringify(event),
      );
      const deliver = db.prepare(
        "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, next_attempt_ms) VALUES (?, ?, 'pending', ?)",
      );
      for (const t of targets) deliver.run(event.id, t.id, Date.now());
      return event;
    },
    event(id: string): EventObject | undefined {
      const row = db.prepare<[string], { json: string }>('SELECT json FROM events WHERE id = ?').get(id);
      return row && (JSON.parse(row.json) as EventObject);
    },
    events(filter: { objectId?: string } = {}): EventObject[] {
      return db
        .prepare<[string | null, string | null], { json: string }>(
          'SELECT json FROM events WHERE (? IS NULL OR object_id = ?) ORDER BY seq',
        )
        .all(filter.objectId ?? null, filter.objectId ?? null)
        .map((r) => JSON.parse(r.json) as EventObject);
    },

    /** Deliveries whose time has come, with what sending them needs. */
    due(
      nowMs: number,
      limit: number,
    ): { eventId: string; endpointId: string; url: string; secret: string; payload: string; attempts: number }[] {
      return db
        .prepare<
          [number, number],
          { event_id: string; endpoint_id: string; url: string; secret: string; json: string; attempts: number }
        >(
          `SELECT d.event_id, d.endpoint_id, w.url, w.secret, e.json, d.attempts FROM webhook_deliveries d
             JOIN webhook_endpoints w ON w.id = d.endpoint_id JOIN events e ON e.id = d.event_id
            WHERE d.status = 'pending' AND d.next_attempt_ms <= ? ORDER BY d.next_attempt_ms LIMIT ?`,
        )
        .all(nowMs, limit)
        .map((r) => ({
          eventId: r.event_id,
          endpointId: r.endpoint_id,
          url: r.url,
          secret: r.secret,
          payload: r.json,
          attempts: r.attempts,
        }));
    },
    /** Records one attempt: delivered on a 2xx, else due again at `retryAtMs`, or failed for good when that is null. */
    attempted(
      eventId: string,
      endpointId: string,
      outcome: { status: number | null; error: string | null; delivered: boolean; retryAtMs: number | null },
    ): void {
      const status = outcome.delivered ? 'delivered' : outcome.retryAtMs === null ? 'failed' : 'pending';
      db.prepare(
        `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, last_status = ?, last_error = ?, next_attempt_ms = COALESCE(?, next_attempt_ms),
           delivered_at = CASE WHEN ? = 'delivered' THEN ? ELSE delivered_at END WHERE event_id = ? AND endpoint_id = ?`,
      ).run(
        status,
        outcome.status,
        outcome.error,
        outcome.retryAtMs,
        status,
        new Date().toISOString(),
        eventId,
        endpointId,
      );
    },
    /** Sends an event again to every endpoint whose delivery of it failed for good; how many. */
    resend(eventId: string): number {
      return db
        .prepare(
          "UPDATE webhook_deliveries SET status = 'pending', next_attempt_ms = ? WHERE event_id = ? AND status = 'failed'",
        )
        .run(Date.now(), eventId).changes;
    },
    deliveries(filter: { eventId?: string; endpointId?: string } = {}): Delivery[] {
      return db
        .prepare<
          [string | null, string | null, string | null, string | null],
          {
            event_id: string;
            endpoint_id: string;
            type: string;
            status: Delivery['status'];
            attempts: number;
            last_status: number | null;
            last_error: string | null;
            delivered_at: string | null;
          }
        >(
          `SELECT d.*, e.type FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
            WHERE (? IS NULL OR d.event_id = ?) AND (? IS NULL OR d.endpoint_id = ?) ORDER BY e.seq`,
        )
        .all(filter.eventId ?? null, filter.eventId ?? null, filter.endpointId ?? null, filter.endpointId ?? null)
        .map((r) => ({
          eventId: r.event_id,
          endpointId: r.endpoint_id,
          type: r.type,
          status: r.status,
          attempts: r.attempts,
          lastStatus: r.last_status,
          lastError: r.last_error,
          deliveredAt: r.delivered_at,
        }));
    },

    /** A refund's later change (settling, failing), due at a time; kept in the file, so a restart does not lose it. */
    scheduleTransition(
      refundId: string,
      toStatus: 'succeeded' | 'failed',
      dueMs: number,
      failureReason: string | null,
    ): void {
      db.prepare(
        'INSERT INTO refund_transitions (refund_id, to_status, failure_reason, due_ms) VALUES (?, ?, ?, ?)',
      ).run(refundId, toStatus, failureReason, dueMs);
    },
    /** Makes a refund's pending changes due now (the on-demand settling tests use); how many there were. */
    expediteTransitions(refundId: string, nowMs: number): number {
      return db
        .prepare('UPDATE refund_transitions SET due_ms = ? WHERE refund_id = ? AND done = 0')
        .run(nowMs, refundId).changes;
    },
    dueTransitions(
      nowMs: number,
    ): { seq: number; refundId: string; toStatus: 'succeeded' | 'failed'; failureReason: string | null }[] {
      return db
        .prepare<
          [number],
          { seq: number; refund_id: string; to_status: 'succeeded' | 'failed'; failure_reason: string | null }
        >('SELECT * FROM refund_transitions WHERE done = 0 AND due_ms <= ? ORDER BY due_ms, seq')
        .all(nowMs)
        .map((r) => ({ seq: r.seq, refundId: r.refund_id, toStatus: r.to_status, failureReason: r.failure_reason }));
    },
    transitionDone(seq: number): void {
      db.prepare('UPDATE refund_transitions SET done = 1 WHERE seq = ?').run(seq);
    },
  };
}

export type EventLog = ReturnType<typeof createEventLog>;
