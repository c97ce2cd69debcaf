import type { OperationRecord, OperationStatus, RefundReceipt } from '../contract/receipts';

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
