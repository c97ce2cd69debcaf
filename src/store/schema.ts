// The store's tables as DDL, written once for both databases ({int}, {id}, {strict}: migrations.ts). Each text
// belongs to the migration that runs it and is never edited once released.

/** 001: orders and their refunds, the outbox, operations and their attempts and audit, faults, the queue, provider events. */
export const INITIAL = `
CREATE TABLE IF NOT EXISTS orders (
  id TEXT PRIMARY KEY,
  payment_intent_id TEXT NOT NULL,
  customer_email TEXT NOT NULL,
  currency TEXT NOT NULL,
  amount {int} NOT NULL CHECK (amount > 0),
  refunded_amount {int} NOT NULL CHECK (refunded_amount >= 0 AND refunded_amount <= amount),
  status TEXT NOT NULL CHECK (status IN ('paid', 'partially_refunded', 'refunded')),
  version {int} NOT NULL,
  updated_at TEXT NOT NULL
){strict};
CREATE TABLE IF NOT EXISTS order_refunds (
  operation_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL REFERENCES orders(id),
  refund_id TEXT NOT NULL,
  amount {int} NOT NULL CHECK (amount > 0),
  prior_refunded_amount {int} NOT NULL,
  prior_status TEXT NOT NULL,
  applied_version {int} NOT NULL,
  applied_at TEXT NOT NULL,
  reverted_by_key TEXT UNIQUE,
  reverted_at TEXT
){strict};
CREATE INDEX IF NOT EXISTS order_refunds_order_id ON order_refunds(order_id);
CREATE TABLE IF NOT EXISTS notification_outbox (
  key TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('refund_notice', 'refund_correction', 'digest')),
  recipient TEXT NOT NULL,
  subject TEXT NOT NULL,
  message_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'sent')),
  sending_since TEXT,
  attempts {int} NOT NULL,
  provider_response TEXT,
  created_at TEXT NOT NULL,
  sent_at TEXT
){strict};
CREATE TABLE IF NOT EXISTS operations (
  operation_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  operation_version {int} NOT NULL,
  scope TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  request_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('intent', 'unknown', 'refunded', 'partial', 'failed', 'rejected', 'completed')),
  refund_json TEXT,
  first_sent_at TEXT,
  last_sent_at TEXT,
  requests_sent {int} NOT NULL DEFAULT 0,
  absence_confirmed_at TEXT,
  proven_absent_through {int},
  reason TEXT,
  created_at TEXT NOT NULL,
  created_by TEXT NOT NULL,
  updated_at TEXT NOT NULL
){strict};
CREATE INDEX IF NOT EXISTS operations_order_id ON operations(order_id);
CREATE TABLE IF NOT EXISTS attempts (
  id {id},
  key TEXT NOT NULL,
  step TEXT NOT NULL,
  operation_id TEXT NOT NULL,
  workflow_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  attempt {int} NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  transport_requests {int} NOT NULL DEFAULT 0,
  outcome TEXT,
  certainty TEXT,
  reason TEXT,
  retry_after_ms {int},
  next_delay_ms {int},
  provider_request_id TEXT
){strict};
CREATE INDEX IF NOT EXISTS attempts_key_run ON attempts(key, run_id);
CREATE TABLE IF NOT EXISTS audit (
  seq {id},
  operation_id TEXT NOT NULL,
  at TEXT NOT NULL,
  actor TEXT NOT NULL,
  event TEXT NOT NULL,
  detail TEXT NOT NULL
){strict};
CREATE INDEX IF NOT EXISTS audit_operation_id ON audit(operation_id);
CREATE TABLE IF NOT EXISTS store_faults (
  id {id},
  kind TEXT NOT NULL CHECK (kind IN ('conflict', 'busy')),
  order_id TEXT,
  remaining {int} NOT NULL CHECK (remaining >= 0),
  hits {int} NOT NULL DEFAULT 0
){strict};
CREATE TABLE IF NOT EXISTS refund_requests (
  id {id},
  order_id TEXT NOT NULL,
  operation_version {int} NOT NULL,
  amount {int} NOT NULL CHECK (amount > 0),
  currency TEXT NOT NULL,
  reason TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  source TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued', 'started', 'refused')),
  queued_at TEXT NOT NULL,
  workflow_id TEXT,
  started_by TEXT,
  started_at TEXT,
  last_error TEXT,
  attempts {int} NOT NULL DEFAULT 0,
  UNIQUE (order_id, operation_version)
){strict};
CREATE TABLE IF NOT EXISTS provider_events (
  event_id TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  operation_id TEXT,
  refund_id TEXT,
  refund_status TEXT,
  amount {int},
  currency TEXT,
  created {int} NOT NULL,
  received_at TEXT NOT NULL,
  deliveries {int} NOT NULL DEFAULT 1,
  handed_to TEXT,
  handed_at TEXT,
  outcome TEXT
){strict};
CREATE INDEX IF NOT EXISTS provider_events_operation ON provider_events(operation_id)
`;

/** The outbox's kinds from 005 on. */
export const OUTBOX_KINDS = ['refund_notice', 'refund_correction', 'digest', 'checkout_receipt', 'checkout_correction'];

/** 005: carts and the stock they reserve. */
export const CHECKOUT = `
CREATE TABLE IF NOT EXISTS stock (
  sku TEXT PRIMARY KEY,
  available {int} NOT NULL CHECK (available >= 0),
  version {int} NOT NULL
){strict};
CREATE TABLE IF NOT EXISTS checkouts (
  id TEXT PRIMARY KEY,
  customer_email TEXT NOT NULL,
  currency TEXT NOT NULL,
  amount {int} NOT NULL CHECK (amount > 0),
  items_json TEXT NOT NULL,
  reserved_by_key TEXT,
  reserved_at TEXT,
  released_by_key TEXT,
  released_at TEXT,
  created_at TEXT NOT NULL
){strict}`;

/** 005: every saga's send records, keyed by step key (the refund's copied in by 006). */
export const SENDS = `
CREATE TABLE IF NOT EXISTS sends (
  key TEXT PRIMARY KEY,
  operation_id TEXT NOT NULL,
  requests_sent {int} NOT NULL,
  first_sent_at TEXT,
  last_sent_at TEXT,
  off_the_wire_by TEXT,
  proven_absent_through {int},
  receipt_json TEXT,
  updated_at TEXT NOT NULL
){strict}`;
