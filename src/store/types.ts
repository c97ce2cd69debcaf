import type { Order, OrderReceipt } from '../shared';

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
}

export interface RevertRefundInput {
  orderId: string;
  operationId: string;
  /** The compensation's own key: reverting twice changes nothing. */
  compensationKey: string;
}

/**
 * pending: no attempt has handed the message to the mail server (or the server provably refused it);
 * sending: an attempt is handing it over, or did and never learned the answer; sent: the server accepted it.
 */
export type NotificationStatus = 'pending' | 'sending' | 'sent';

export interface OutboxEntry {
  key: string;
  orderId: string;
  kind: 'refund_notice' | 'refund_correction';
  recipient: string;
  subject: string;
  messageId: string;
  status: NotificationStatus;
  attempts: number;
  providerResponse: string | null;
  createdAt: string;
  sentAt: string | null;
}

export type NewOutboxEntry = Pick<OutboxEntry, 'key' | 'orderId' | 'kind' | 'recipient' | 'subject' | 'messageId'>;

/** Thrown when another writer changed the order between our read and our write. */
export class VersionConflictError extends Error {
  override name = 'VersionConflictError';
}

export class OrderNotFoundError extends Error {
  override name = 'OrderNotFoundError';
}

/** The order store and notification outbox. Async so that a PostgreSQL store fits behind it. */
export interface OrderStore {
  /** Inserts the order, or returns the existing one when an identical order is already there. */
  seedOrder(order: NewOrder): Promise<Order>;
  getOrder(id: string): Promise<Order | undefined>;
  /** Idempotent by operation id; optimistic on the order's version. */
  applyRefund(input: ApplyRefundInput): Promise<OrderReceipt>;
  /** Restores the state the order had before `operationId`, idempotent by compensation key. */
  revertRefund(input: RevertRefundInput): Promise<OrderReceipt>;
  /** Records the intent to send (status pending) unless an entry for the key exists; returns the entry. */
  claimNotification(entry: NewOutboxEntry): Promise<OutboxEntry>;
  /** Moves pending → sending just before the message goes to SMTP; false, changing nothing, when the entry is not pending. */
  markNotificationSending(key: string): Promise<boolean>;
  /** Moves sending → pending after a failure that proves the server did not accept the message; false when not sending. */
  releaseNotification(key: string): Promise<boolean>;
  /** Records the server's acceptance (sending → sent); an entry already sent keeps its first acceptance. */
  markNotificationSent(key: string, providerResponse: string): Promise<OutboxEntry>;
  getNotification(key: string): Promise<OutboxEntry | undefined>;
  close(): Promise<void>;
}
