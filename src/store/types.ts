import type { OperationRecord, OperationStatus, RefundReceipt } from '../contract/receipts';
import type { Order } from '../domain/order';
import type { AttemptSummary } from '../reliability/attempt-ledger';

// The operation's record is what beginOperation returns: the contract holds it.
export type { OperationRecord, OperationStatus } from '../contract/receipts';

export type NewOrder = Omit<Order, 'refundedAmount' | 'status' | 'version'>;

export interface ApplyRefundInput {
  orderId: string;
  /** The refund's operation id: applying the same operation twice changes nothing. */
  operationId: string;
  refundId: string;
  amount: number;
  /** Who applies it, for the audit trail (the workflow id). */
  actor?: string;
}

export type RevertRefundInput = Pick<ApplyRefundInput, 'orderId' | 'operationId' | 'actor'> & {
  /** The compensation's own key: reverting twice changes nothing. */
  compensationKey: string;
};

/** An operation's refund as the order records it. */
export type AppliedRefund = Omit<ApplyRefundInput, 'actor'> & {
  /** Set once a compensation took it off the order again. */
  revertedByKey: string | null;
};

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

export type NewOperation = Pick<
  OperationRecord,
  'operationId' | 'orderId' | 'operationVersion' | 'scope' | 'requestHash' | 'request'
> & { actor: string };

export interface OperationUpdate {
  status: OperationStatus;
  refund?: RefundReceipt;
  reason?: string;
  absenceConfirmedAt?: string;
  /** Apply only if the operation has been sent exactly this many times (nothing was sent since the caller looked). */
  ifRequestsSent?: number;
}

/** One Temporal attempt of one step's activity, as a step's evidence lists it, and whose attempt it is. */
export type AttemptRecord = AttemptSummary & {
  id: number;
  key: string;
  step: string;
  operationId: string;
  workflowId: string;
  runId: string;
};

export type NewAttempt = Pick<AttemptRecord, 'key' | 'step' | 'operationId' | 'workflowId' | 'runId' | 'attempt'>;
export type AttemptEnd = Omit<AttemptSummary, 'attempt' | 'startedAt' | 'finishedAt'>;

export interface AuditEntry {
  seq: number;
  operationId: string;
  at: string;
  /** The workflow (or person) that caused it. */
  actor: string;
  event: string;
  detail: Record<string, unknown>;
}
