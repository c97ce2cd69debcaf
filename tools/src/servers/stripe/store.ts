// The local Stripe's state in SQLite, so payment intents, refunds, stored idempotent responses
// and the ledger all survive a restart.
import Database from 'better-sqlite3';
import { createEventLog, EVENTS_SCHEMA } from './events';

export interface PaymentIntentObject {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_capturable: number;
  amount_received: number;
  automatic_payment_methods: { enabled: boolean; allow_redirects?: string } | null;
  capture_method: 'automatic';
  client_secret: string;
  confirmation_method: 'automatic';
  created: number;
  currency: string;
  description: string | null;
  latest_charge: string | null;
  livemode: false;
  metadata: Record<string, string>;
  payment_method: string | null;
  payment_method_types: string[];
  status: 'requires_payment_method' | 'requires_confirmation' | 'succeeded';
  /** Why the last confirmation failed (a decline), as Stripe says it. */
  last_payment_error?: { type: 'card_error'; code: string; decline_code: string; message: string } | null;
}

export interface RefundObject {
  id: string;
  object: 'refund';
  amount: number;
  balance_transaction: string | null;
  charge: string | null;
  created: number;
  currency: string;
  failure_reason?: string;
  metadata: Record<string, string>;
  payment_intent: string;
  reason: string | null;
  receipt_number: null;
  status: 'pending' | 'succeeded' | 'failed' | 'canceled';
}

export interface LedgerEffect {
  seq: number;
  /** charge.succeeded: the customer was charged (a confirmed PaymentIntent); a decline charges nothing. */
  type: 'payment_intent.created' | 'charge.succeeded' | 'refund.created';
  objectId: string;
  paymentIntentId: string;
  amount: number;
  idempotencyKey: string | null;
  /** Requests that carried this key while its stored response was live: the first, replays and rejected reuses. */
  requestsWithKey: number;
  createdAt: string;
}

/** One request the server received, as it answered it: what a client's own attempt ledger is checked against. */
export interface RequestRow {
  seq: number;
  at: string;
  requestId: string;
  method: string;
  path: string;
  idempotencyKey: string | null;
  paymentIntent: string | null;
  /** Null when the connection was cut instead of answered. */
  status: number | null;
  replayed: boolean | number;
  /** The injected fault that shaped the answer, if any. */
  fault: string | null;
}

export interface StoredKey {
  key: string;
  fingerprint: string;
  requestId: string;
  /** Null while the first request with this key is still executing. */
  status: number | null;
  body: string | null;
  createdAtMs: number;
}

export type Store = ReturnType<typeof openStore>;

export function openStore(dbPath: string) {
  const db = new Database(dbPath);
  db.pragma('journal_mode = WAL');
  db.exec(`
    CREATE TABLE IF NOT EXISTS payment_intents (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL UNIQUE,
      json TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS refunds (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL UNIQUE,
      payment_intent TEXT NOT NULL,
      json TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS refunds_by_payment_intent ON refunds (payment_intent, seq);
    CREATE TABLE IF NOT EXISTS requests (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      at TEXT NOT NULL,
      request_id TEXT NOT NULL,
      method TEXT NOT NULL,
      path TEXT NOT NULL,
      idempotency_key TEXT,
      payment_intent TEXT,
      status INTEGER,
      replayed INTEGER NOT NULL,
      fault TEXT
    );
    CREATE INDEX IF NOT EXISTS requests_by_key ON requests (idempotency_key);
    CREATE TABLE IF NOT EXISTS idempotency_keys (
      key TEXT PRIMARY KEY,
      fingerprint TEXT NOT NULL,
      request_id TEXT NOT NULL,
      status INTEGER,
      body TEXT,
      created_at_ms INTEGER NOT NULL,
      requests INTEGER NOT NULL,
      effect_seq INTEGER
    );
    CREATE TABLE IF NOT EXISTS effects (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      type TEXT NOT NULL,
      object_id TEXT NOT NULL,
      payment_intent_id TEXT NOT NULL,
      amount INTEGER NOT NULL,
      idempotency_key TEXT,
      requests_with_key INTEGER NOT NULL,
      created_at TEXT NOT NULL
    );
  `);
  db.exec(EVENTS_SCHEMA);
  // Databases made before the lagging-list fault existed lack its column.
  const refundColumns = db
    .prepare<[], { name: string }>('PRAGMA table_info(refunds)')
    .all()
    .map((c) => c.name);
  if (!refundColumns.includes('listed_after_ms'))
    db.exec('ALTER TABLE refunds ADD COLUMN listed_after_ms INTEGER NOT NULL DEFAULT 0');
  // A request still in flight when the process stopped committed nothing (effect and stored
  // response are written in one transaction), so its key must not stay locked after a restart.
  db.prepare('DELETE FROM idempotency_keys WHERE status IS NULL').run();

  const q = {
    getPi: db.prepare<[string], { json: string }>('SELECT json FROM payment_intents WHERE id = ?'),
    insertPi: db.prepare('INSERT INTO payment_intents (id, json) VALUES (?, ?)'),
    allPis: db.prepare<[], { json: string }>('SELECT json FROM payment_intents ORDER BY seq'),
    getRefund: db.prepare<[string], { json: string }>('SELECT json FROM refunds WHERE id = ?'),
    refundSeq: db.prepare<[string], { seq: number }>('SELECT seq FROM refunds WHERE id = ?'),
    insertRefund: db.prepare('INSERT INTO refunds (id, payment_intent, json) VALUES (?, ?, ?)'),
    updateRefund: db.prepare('UPDATE refunds SET json = ? WHERE id = ?'),
    listRefunds: db.prepare<[{ pi: string | null; before: number; limit: number; now: number }], { json: string }>(
      `SELECT json FROM refunds WHERE (@pi IS NULL OR payment_intent = @pi) AND seq < @before AND listed_after_ms <= @now
       ORDER BY seq DESC LIMIT @limit`,
    ),
    allRefunds: db.prepare<[string], { json: string }>(
      'SELECT json FROM refunds WHERE payment_intent = ? ORDER BY seq DESC',
    ),
    hideRefund: db.prepare('UPDATE refunds SET listed_after_ms = ? WHERE id = ?'),
    insertRequest: db.prepare(
      `INSERT INTO requests (at, request_id, method, path, idempotency_key, payment_intent, status, replayed, fault)
       VALUES (@at, @requestId, @method, @path, @idempotencyKey, @paymentIntent, @status, @replayed, @fault)`,
    ),
    requests: db.prepare<[{ key: string | null; pi: string | null; path: string | null }], RequestRow>(
      `SELECT seq, at, request_id AS requestId, method, path, idempotency_key AS idempotencyKey, payment_intent AS paymentIntent,
              status, replayed, fault
       FROM requests WHERE (@key IS NULL OR idempotency_key = @key) AND (@pi IS NULL OR payment_intent = @pi)
         AND (@path IS NULL OR path = @path) ORDER BY seq`,
    ),
    getKey: db.prepare<[string], StoredKey>(
      `SELECT key, fingerprint, request_id AS requestId, status, body, created_at_ms AS createdAtMs
       FROM idempotency_keys WHERE key = ?`,
    ),
    beginKey: db.prepare(
      `INSERT INTO idempotency_keys (key, fingerprint, request_id, created_at_ms, requests) VALUES (?, ?, ?, ?, 1)`,
    ),
    completeKey: db.prepare('UPDATE idempotency_keys SET status = ?, body = ? WHERE key = ?'),
    deleteKey: db.prepare('DELETE FROM idempotency_keys WHERE key = ?'),
    countKey: db.prepare('UPDATE idempotency_keys SET requests = requests + 1 WHERE key = ?'),
    countEffect: db.prepare(
      `UPDATE effects SET requests_with_key = requests_with_key + 1
       WHERE seq = (SELECT effect_seq FROM idempotency_keys WHERE key = ?)`,
    ),
    keyRequests: db.prepare<[string], { requests: number }>('SELECT requests FROM idempotency_keys WHERE key = ?'),
    insertEffect: db.prepare(
      `INSERT INTO effects (type, object_id, payment_intent_id, amount, idempotency_key, requests_with_key, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    linkEffect: db.prepare('UPDATE idempotency_keys SET effect_seq = ? WHERE key = ?'),
    ledger: db.prepare<[{ pi: string | null }], LedgerEffect>(
      `SELECT seq, type, object_id AS objectId, payment_intent_id AS paymentIntentId, amount,
              idempotency_key AS idempotencyKey, requests_with_key AS requestsWithKey, created_at AS createdAt
       FROM effects WHERE (@pi IS NULL OR payment_intent_id = @pi) ORDER BY seq`,
    ),
  };

  return {
    transaction<T>(fn: () => T): T {
      return db.transaction(fn)();
    },
    getPaymentIntent(id: string): PaymentIntentObject | undefined {
      const row = q.getPi.get(id);
      return row && (JSON.parse(row.json) as PaymentIntentObject);
    },
    insertPaymentIntent(pi: PaymentIntentObject): void {
      q.insertPi.run(pi.id, JSON.stringify(pi));
    },
    /** Oldest first; `matches` reads one PaymentIntent (the search's query). */
    searchPaymentIntents(matches: (pi: PaymentIntentObject) => boolean): PaymentIntentObject[] {
      return q.allPis
        .all()
        .map((row) => JSON.parse(row.json) as PaymentIntentObject)
        .filter(matches);
    },
    getRefund(id: string): RefundObject | undefined {
      const row = q.getRefund.get(id);
      return row && (JSON.parse(row.json) as RefundObject);
    },
    insertRefund(refund: RefundObject): void {
      q.insertRefund.run(refund.id, refund.payment_intent, JSON.stringify(refund));
    },
    updateRefund(refund: RefundObject): void {
      q.updateRefund.run(JSON.stringify(refund), refund.id);
    },
    /** Newest first, as Stripe lists; fetches one extra row to answer has_more. */
    listRefunds(opts: { paymentIntent?: string; limit: number; startingAfter?: string }):
      | {
          data: RefundObject[];
          hasMore: boolean;
        }
      | undefined {
      let before = Number.MAX_SAFE_INTEGER;
      if (opts.startingAfter !== undefined) {
        const row = q.refundSeq.get(opts.startingAfter);
        if (!row) return undefined;
        before = row.seq;
      }
      const rows = q.listRefunds.all({
        pi: opts.paymentIntent ?? null,
        before,
        limit: opts.limit + 1,
        now: Date.now(),
      });
      const data = rows.slice(0, opts.limit).map((r) => JSON.parse(r.json) as RefundObject);
      return { data, hasMore: rows.length > opts.limit };
    },
    /** Every refund on the intent, listed or not: what the charge really carries. */
    refundsFor(paymentIntentId: string): RefundObject[] {
      return q.allRefunds.all(paymentIntentId).map((r) => JSON.parse(r.json) as RefundObject);
    },
    /** Keeps a refund out of list results until the given time (a lagging index); retrieve still finds it. */
    hideFromList(refundId: string, untilMs: number): void {
      q.hideRefund.run(untilMs, refundId);
    },

    recordRequest(r: Omit<RequestRow, 'seq' | 'replayed'> & { replayed: boolean }): void {
      q.insertRequest.run({ ...r, replayed: r.replayed ? 1 : 0 });
    },
    requests(filter: { idempotencyKey?: string; paymentIntent?: string; path?: string }): RequestRow[] {
      return q.requests
        .all({ key: filter.idempotencyKey ?? null, pi: filter.paymentIntent ?? null, path: filter.path ?? null })
        .map((r) => ({ ...r, replayed: Boolean(r.replayed) }));
    },

    getKey(key: string): StoredKey | undefined {
      return q.getKey.get(key);
    },
    beginKey(key: string, fingerprint: string, requestId: string, nowMs: number): void {
      q.beginKey.run(key, fingerprint, requestId, nowMs);
    },
    completeKey(key: string, status: number, body: string): void {
      q.completeKey.run(status, body, key);
    },
    forgetKey(key: string): void {
      q.deleteKey.run(key);
    },
    /** Another request arrived carrying this key: count it on the key and on the effect it produced. */
    countKeyRequest(key: string): void {
      db.transaction(() => {
        q.countKey.run(key);
        q.countEffect.run(key);
      })();
    },

    recordEffect(e: Omit<LedgerEffect, 'seq' | 'requestsWithKey' | 'createdAt'>): void {
      const requests = e.idempotencyKey === null ? 0 : (q.keyRequests.get(e.idempotencyKey)?.requests ?? 1);
      const { lastInsertRowid } = q.insertEffect.run(
        e.type,
        e.objectId,
        e.paymentIntentId,
        e.amount,
        e.idempotencyKey,
        requests,
        new Date().toISOString(),
      );
      if (e.idempotencyKey !== null) q.linkEffect.run(lastInsertRowid, e.idempotencyKey);
    },
    ledger(paymentIntentId?: string): LedgerEffect[] {
      return q.ledger.all({ pi: paymentIntentId ?? null });
    },

    /** Webhook endpoints, events and their deliveries, and refunds' scheduled changes. */
    events: createEventLog(db),

    close(): void {
      db.close();
    },
  };
}
