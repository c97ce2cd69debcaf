// What a refund run returns: completed with its receipts, or ended with an outcome the business
// expects (rejected, compensated, abandoned, stopped). Failed is for incidents, not outcomes.
import type { RefundRequestInput } from '../domain/refund-request';
import type { NotificationReceipt, OrderReceipt, RefundReceipt } from './receipts';
import type { RefundStep } from './steps';

export interface CompletedRefund {
  workflowId: string;
  orderId: string;
  operationId: string;
  status: 'completed';
  refund: RefundReceipt;
  order: OrderReceipt;
  notification: NotificationReceipt;
}

export interface EndedRefund {
  workflowId: string;
  orderId: string | null;
  operationId: string | null;
  status: 'rejected' | 'compensated' | 'abandoned' | 'stopped';
  reason: string;
  failedStep: RefundStep | null;
}

export type RefundResult = CompletedRefund | EndedRefund;

/** The refund workflow's type, for clients that start or watch one by name (REFUND_WORKFLOW); src/worker-pools.ts checks it. */
export type RefundWorkflow = (input: RefundRequestInput) => Promise<RefundResult>;
