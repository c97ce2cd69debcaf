import type { OperationRecord, OperationStatus, OrderReceipt, RefundReceipt } from '../contract/receipts';
import type { Order } from '../domain/order';
import type { SqlCheckouts } from './checkouts';
import type { SqlSends } from './sends';
import type { ProviderEventLog } from './provider-event-log';
import type { RefundQueue } from './refund-queue';
import type { StoreFaults } from './store-faults';

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

export interface OutboxEntry {
  key: string;
  /** The order it is about; '' for an operators' digest. */
  orderId: string;
  kind: 'refund_notice' | 'refund_correction' | 'digest' | 'checkout_receipt' | 'checkout_correction';
  recipient: string;
  subject: string;
  messageId: string;
  /** pending: not handed over (or provably refused by the mail server); sending: answer unknown; sent: accepted. */
  status: 'pending' | 'sending' | 'sent';
  /** When the current hand-over began: a recent one may still be in flight, an old one ended unknown. */
  sendingSince: string | null;
  /** The latest the current hand-over can still be on the wire, by the store's clock; null if its sender gave none. */
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

/** A ledger row's end as written; `alone`: no other row under its key and run, so the step's ledger is this attempt. */
export interface FinishedAttempt {
  finishedAt: string;
  alone: boolean;
}

/**
 * An attempt's ledger row, without commits of its own where it can be: its beginning rides in the first transaction
 * inside `run` (or commits alone at `begun()`, which every provider request awaits), its end in `recording`'s.
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
   * Records the intent, or returns the record already there; IntentConflictError when the request hash differs,
   * LaterVersionError for a new operation below the order's highest version.
   */
  commitIntent(op: NewOperation): Promise<{ record: OperationRecord; created: boolean }>;
  get(operationId: string): Promise<OperationRecord | undefined>;
  /** Now (ms since the epoch) by the clock that stamps sends: on PostgreSQL the server's, one clock for all hosts. */
  clock(): Promise<number>;
  /** Every operation on the order, oldest first. */
  forOrder(orderId: string): Promise<OperationRecord[]>;
  /**
   * Stamps and counts a create request just before it is sent: only the order's highest version sends
   * (LaterVersionError), and only while no other operation of the order has a send not proven absent
   * (OperationInFlightError). `onWireForMs`: how long after its stamp this send can still be on the wire.
   */
  markSent(operationId: string, actor: string, onWireForMs: number): Promise<OperationRecord>;
  /** A new status and its audit entry in one transaction; a move the current status does not allow changes nothing. */
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
   * claimNotification, then markNotificationSending if pending, in one transaction: `ours` says whether this caller
   * holds the hand-over, `stamp` is its `sendingSince`, `claimed` the entry before the move.
   */
  claimHandOver(
    entry: NewOutboxEntry,
    onWireForMs?: number,
  ): Promise<{ claimed: OutboxEntry; ours: boolean; stamp: string | null }>;
  /** pending → sending, stamped by the store's clock, on the wire until `onWireForMs` later; false when not pending. */
  markNotificationSending(key: string, onWireForMs?: number): Promise<boolean>;
  /**
   * Takes over a hand-over that ended unanswered, to resend it: re-stamps `sendingSince` (store clock, not before
   * `notBefore`) only if it is still `since` and at least `endedAfterMs` old; the new stamp, or null. One of two wins.
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
   * A person's word that a message whose hand-over is unknown was delivered: sent, naming who confirmed it, audited
   * with `confirmedBy`. An entry not sending, or no longer on the hand-over judged, is returned unchanged.
   */
  confirmNotificationDelivered(key: string, confirmation: DeliveryConfirmation): Promise<OutboxEntry>;
  /** The order's record of an operation's refund, if it was applied. */
  appliedRefund(operationId: string): Promise<AppliedRefund | undefined>;
  getNotification(key: string): Promise<OutboxEntry | undefined>;
  /** The cheapest round trip to the database (a readiness probe's): throws when it does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
