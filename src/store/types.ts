import type { OperationRecord, OperationStatus, OrderReceipt, RefundReceipt } from '../contract/receipts';
import type { Order } from '../domain/order';
import type { SqlCheckouts } from './checkouts';
import type { SqlSends } from './sends';
import type { RefundRequest } from '../domain/refund-request';

// The operation's record is what beginOperation returns: the contract holds it.
export type { OperationRecord, OperationStatus } from '../contract/receipts';

export interface NewOrder {
  id: string;
  paymentIntentId: string;
  customerEmail: string;
  currency: string;
  amount: number;
}

export interface ApplyRefundInput {
  orderId: string;
  /** The refund's operation id: applying the same operation twice changes nothing. */
  operationId: string;
  refundId: string;
  amount: number;
  /** Who applies it, for the audit trail (the workflow id). */
  actor?: string;
}

export interface RevertRefundInput {
  orderId: string;
  operationId: string;
  /** The compensation's own key: reverting twice changes nothing. */
  compensationKey: string;
  actor?: string;
}

/** An operation's refund as the order records it. */
export interface AppliedRefund {
  operationId: string;
  orderId: string;
  refundId: string;
  amount: number;
  /** Set once a compensation took it off the order again. */
  revertedByKey: string | null;
}

/**
 * pending: no attempt has handed the message to the mail server (or the server provably refused it);
 * sending: an attempt is handing it over, or did and never learned the answer; sent: the server accepted it.
 */
export type NotificationStatus = 'pending' | 'sending' | 'sent';

export interface OutboxEntry {
  key: string;
  /** The order it is about; '' for an operators' digest. */
  orderId: string;
  kind: 'refund_notice' | 'refund_correction' | 'digest' | 'checkout_receipt' | 'checkout_correction';
  recipient: string;
  subject: string;
  messageId: string;
  status: NotificationStatus;
  /** When the current hand-over began: a recent one may still be in flight, an old one ended unknown. */
  sendingSince: string | null;
  /**
   * The latest the current hand-over can still be on the wire, as its sender recorded it with its stamp (its own
   * deadline, by the store's clock); null for a stamp taken without one (a worker from before it was recorded).
   */
  sendingUntil: string | null;
  attempts: number;
  providerResponse: string | null;
  createdAt: string;
  sentAt: string | null;
}

/** Who confirmed a delivery and their evidence, for the operation's audit trail (written by `actor`, the run). */
export interface DeliveryConfirmation {
  by: string;
  reason: string;
  operationId: string;
  actor: string;
  /** The hand-over judged ended (its stamp): confirmed only while it is still the entry's current one. */
  sendingSince: string | null;
}

export type NewOutboxEntry = Pick<OutboxEntry, 'key' | 'orderId' | 'kind' | 'recipient' | 'subject' | 'messageId'>;

export interface NewOperation {
  operationId: string;
  orderId: string;
  operationVersion: number;
  scope: string;
  requestHash: string;
  request: OperationRecord['request'];
  actor: string;
}

export interface OperationUpdate {
  status: OperationStatus;
  refund?: RefundReceipt;
  reason?: string;
  absenceConfirmedAt?: string;
  /** Apply only if the operation has been sent exactly this many times (nothing was sent since the caller looked). */
  ifRequestsSent?: number;
}

/** One Temporal attempt of one step's activity, with the provider requests it sent. */
export interface AttemptRecord {
  id: number;
  key: string;
  step: string;
  operationId: string;
  workflowId: string;
  runId: string;
  attempt: number;
  startedAt: string;
  finishedAt: string | null;
  transportRequests: number;
  /** "ok", or the failure code it ended with; null while running (or if its worker died). */
  outcome: string | null;
  certainty: string | null;
  reason: string | null;
  retryAfterMs: number | null;
  nextDelayMs: number | null;
  providerRequestId: string | null;
}

export type NewAttempt = Pick<AttemptRecord, 'key' | 'step' | 'operationId' | 'workflowId' | 'runId' | 'attempt'>;
export type AttemptEnd = Pick<
  AttemptRecord,
  'transportRequests' | 'outcome' | 'certainty' | 'reason' | 'retryAfterMs' | 'nextDelayMs' | 'providerRequestId'
>;

export interface AuditEntry {
  seq: number;
  operationId: string;
  at: string;
  /** The workflow (or person) that caused it. */
  actor: string;
  event: string;
  detail: Record<string, unknown>;
}

/** A ledger row just written: its id, and its start as written. */
export interface BegunAttempt {
  id: number;
  startedAt: string;
}

/** A ledger row's end as written, and whether it is the step's only row in the run when it ended. */
export interface FinishedAttempt {
  finishedAt: string;
  /** No other row under the same key and run (as a read right after would find): the step's ledger is this attempt. */
  alone: boolean;
}

/**
 * An attempt's ledger row, written without commits of its own where it can be: its beginning rides in the first
 * transaction the attempt commits inside `run`, and is committed alone by `begun()`, which every provider request
 * awaits first; its end rides in the transaction `recording` wraps, or is written by `finish`. A write that rides
 * commits or rolls back with the transaction carrying it.
 */
export interface OpenAttempt {
  readonly startedAt: string;
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** Runs the store call that records the attempt's effect; its transaction writes the attempt's end as `end()` says. */
  recording<T>(end: () => AttemptEnd, fn: () => Promise<T>): Promise<T>;
  /** The row is on disk once this resolves. */
  begun(): Promise<BegunAttempt>;
  /** Writes the attempt's end, unless a transaction already wrote this very end; undefined when the row is gone. */
  finish(end: AttemptEnd): Promise<FinishedAttempt | undefined>;
}

/** Each operation's durable record, the attempt ledger and the audit trail. */
export interface OperationLog {
  /**
   * Records the intent, or returns the record already there; IntentConflictError when the request
   * hash differs, LaterVersionError for a new operation below the order's highest version.
   */
  commitIntent(op: NewOperation): Promise<{ record: OperationRecord; created: boolean }>;
  get(operationId: string): Promise<OperationRecord | undefined>;
  /**
   * Now, in ms since the epoch, by the clock that stamps sends (`firstSentAt`, `lastSentAt`): the
   * database server's on PostgreSQL, so that workers on hosts whose clocks differ compare a send's
   * stamp with a time taken on the same clock.
   */
  clock(): Promise<number>;
  /** Every operation on the order, oldest first. */
  forOrder(orderId: string): Promise<OperationRecord[]>;
  /**
   * Just before a create request is sent: stamps the send and counts it. Only the order's highest
   * version may send (LaterVersionError), and only while no other operation of the order has a send
   * not proven absent (OperationInFlightError): two versions of one order never both go out.
   * `onWireForMs`: how long after its stamp this send can still be on the wire (the sender's timeout and margin).
   */
  markSent(operationId: string, actor: string, onWireForMs: number): Promise<OperationRecord>;
  /**
   * Moves the operation to a new status, with an audit entry, in one transaction. A move the
   * operation's current status does not allow (a late writer going backwards, a send since the
   * caller looked) changes nothing and says so.
   */
  settle(
    operationId: string,
    update: OperationUpdate,
    actor: string,
    event: string,
    detail?: Record<string, unknown>,
  ): Promise<{ record: OperationRecord; applied: boolean }>;
  /** One attempt of a step, its ledger row written in the attempt's own transactions where it can be (OpenAttempt). */
  openAttempt(attempt: NewAttempt): OpenAttempt;
  /** A step's attempts in one run, oldest first. */
  attempts(key: string, runId: string): Promise<AttemptRecord[]>;
  audit(operationId: string, actor: string, event: string, detail?: Record<string, unknown>): Promise<void>;
  auditTrail(operationId: string): Promise<AuditEntry[]>;
}

export type StoreFaultKind = 'conflict' | 'busy';

/**
 * Faults in the store's own writes, for tests and chaos runs; only a store opened with faults
 * enabled reads them. conflict: a competing writer changes the order between our read and our
 * write; busy: another connection holds the write lock past busy_timeout.
 */
export interface StoreFault {
  id: number;
  kind: StoreFaultKind;
  /** Only writes to this order; null for any. */
  orderId: string | null;
  remaining: number;
  hits: number;
}

export interface QueuedRequest {
  id: number;
  request: RefundRequest;
  /** Where it came from: `cli`, or `<file>:<line>` for a CSV import. */
  source: string;
  /** queued: waits for a batch; started: a run carries it out; refused: it can never start as it is (see lastError). */
  status: 'queued' | 'started' | 'refused';
  queuedAt: string;
  /** The run it started, and the occurrence that started it. */
  workflowId: string | null;
  startedBy: string | null;
  /** Why the last occurrence that took it could not start it; it stays queued. */
  lastError: string | null;
  attempts: number;
}

/** A provider event (Stripe webhook) as the receiver took it. */
export type NewProviderEvent = Pick<
  ProviderEventRecord,
  'eventId' | 'type' | 'operationId' | 'refundId' | 'refundStatus' | 'amount' | 'currency' | 'created'
>;

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

export interface ProviderEventLog {
  /** Records an event by its id; `first` is false for a redelivery. */
  receive(e: NewProviderEvent): Promise<{ record: ProviderEventRecord; first: boolean }>;
  get(eventId: string): Promise<ProviderEventRecord | undefined>;
  handed(eventId: string, to: string | null, outcome: string): Promise<ProviderEventRecord>;
  forOperation(operationId: string): Promise<ProviderEventRecord[]>;
}

/** Refund requests waiting for a scheduled batch (see refund-queue.ts). */
export interface RefundQueue {
  enqueue(request: RefundRequest, source: string): Promise<{ queued: QueuedRequest; created: boolean }>;
  next(limit: number): Promise<QueuedRequest[]>;
  markStarted(id: number, workflowId: string, occurrenceId: string): Promise<QueuedRequest>;
  markNotStarted(id: number, reason: string): Promise<QueuedRequest>;
  markRefused(id: number, reason: string): Promise<QueuedRequest>;
  list(filter?: { status?: QueuedRequest['status']; orderId?: string }): Promise<QueuedRequest[]>;
}

export interface StoreFaults {
  add(fault: { kind: StoreFaultKind; orderId?: string; count?: number }): Promise<StoreFault>;
  list(): Promise<StoreFault[]>;
  clear(): Promise<void>;
}

/** The order store and notification outbox. Async so that a PostgreSQL store fits behind it. */
export interface OrderStore {
  readonly operations: OperationLog;
  readonly faults: StoreFaults;
  readonly queue: RefundQueue;
  readonly providerEvents: ProviderEventLog;
  /** The checkout saga's carts and stock. */
  readonly checkouts: SqlCheckouts;
  /** Send records keyed by step key (the checkout's charge). */
  readonly sends: SqlSends;
  /** Inserts the order, or returns the existing one when an identical order is already there. */
  seedOrder(order: NewOrder): Promise<Order>;
  getOrder(id: string): Promise<Order | undefined>;
  /** Idempotent by operation id; optimistic on the order's version. */
  applyRefund(input: ApplyRefundInput): Promise<OrderReceipt>;
  /** Restores the state the order had before `operationId`, idempotent by compensation key. */
  revertRefund(input: RevertRefundInput): Promise<OrderReceipt>;
  /** Records the intent to send (status pending) unless an entry for the key exists; returns the entry. The hand-over claims with claimHandOver. */
  claimNotification(entry: NewOutboxEntry): Promise<OutboxEntry>;
  /**
   * claimNotification and, when the entry is pending, markNotificationSending, in one transaction: `ours` says
   * whether this caller now holds the hand-over, `stamp` its `sendingSince`; `claimed` is the entry as claimed,
   * before that move. `onWireForMs`: how long after its stamp this hand-over can still be on the wire (its sender's
   * deadline and margin), recorded as `sendingUntil`.
   */
  claimHandOver(
    entry: NewOutboxEntry,
    onWireForMs?: number,
  ): Promise<{ claimed: OutboxEntry; ours: boolean; stamp: string | null }>;
  /** Moves pending → sending (what claimHandOver does after its claim), stamped by the store's clock (`operations.clock`); false, changing nothing, when the entry is not pending. */
  markNotificationSending(key: string, onWireForMs?: number): Promise<boolean>;
  /**
   * Takes over a hand-over that ended without an answer, to resend it: re-stamps `sendingSince` (by the
   * store's clock, no earlier than `notBefore`), with its own bound (`onWireForMs`), only if it is still
   * `since` and, by that clock, at least `endedAfterMs` old. The new stamp, or null, changing nothing,
   * otherwise. Of two attempts, only one takes it over.
   */
  takeOverNotification(
    key: string,
    since: string,
    rule: { endedAfterMs: number; notBefore?: string; onWireForMs?: number },
  ): Promise<string | null>;
  /**
   * Moves sending → pending after a failure that proves the server did not accept the message; false when not
   * sending, or (with `since`) when that hand-over is no longer the current one: another attempt's is never freed.
   */
  releaseNotification(key: string, since?: string): Promise<boolean>;
  /** Records the server's acceptance (sending → sent); an entry already sent keeps its first acceptance. With `audit`, the first acceptance is in the operation's audit trail. */
  markNotificationSent(
    key: string,
    providerResponse: string,
    audit?: { operationId: string; actor: string },
  ): Promise<OutboxEntry>;
  /**
   * Records a person's word that a message whose hand-over is unknown (sending) was delivered: sent, the
   * response naming who confirmed it, and a notification_sent audit entry with `confirmedBy`. An entry
   * that is not sending, or whose hand-over is no longer the one judged (`sendingSince`), is returned unchanged.
   */
  confirmNotificationDelivered(key: string, confirmation: DeliveryConfirmation): Promise<OutboxEntry>;
  /** The order's record of an operation's refund, if it was applied. */
  appliedRefund(operationId: string): Promise<AppliedRefund | undefined>;
  getNotification(key: string): Promise<OutboxEntry | undefined>;
  /** The cheapest round trip to the database (a readiness probe's): throws when it does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
