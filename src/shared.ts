// Names and payload types shared by the worker, the clients, the workflows and the tests.
// Workflow code imports this module, so it must stay free of Node built-ins and I/O.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { z } from 'zod';

export const TASK_QUEUE = 'refunds';

/**
 * Bulkheads: besides the workflow task queue, activities run in two pools of their own, so that a
 * backlog of new side effects never starves reconciliation, decisions' bookkeeping and reads.
 */
export const ACTIVITY_POOLS = ['effects', 'reconcile'] as const;
export type ActivityPool = (typeof ACTIVITY_POOLS)[number];
/** What a worker process can poll: the workflow task queue, and each activity pool's queue. */
export const WORKER_POOLS = ['workflows', ...ACTIVITY_POOLS] as const;
export type WorkerPool = (typeof WORKER_POOLS)[number];
/** The task queue of a pool beside the workflow task queue `base`: `refunds-effects`, `refunds-reconcile`. */
export const poolQueue = (base: string, pool: ActivityPool) => `${base}-${pool}`;
export const DEFAULT_NAMESPACE = 'default';

/** Custom search attributes registered with the dev server, so runs can be filtered in the CLI and Web UI. */
export const SEARCH_ATTRIBUTES = {
  orderId: defineSearchAttributeKey('RefundOrderId', SearchAttributeType.KEYWORD),
  status: defineSearchAttributeKey('RefundStatus', SearchAttributeType.KEYWORD),
  /** The phase: the step the run is at, or stopped at. */
  step: defineSearchAttributeKey('RefundStep', SearchAttributeType.KEYWORD),
  /** What is known of the refund: none, unknown, refunded, partial, failed. */
  effect: defineSearchAttributeKey('RefundEffect', SearchAttributeType.KEYWORD),
  verdict: defineSearchAttributeKey('RefundVerdict', SearchAttributeType.KEYWORD),
  needsAttention: defineSearchAttributeKey('RefundNeedsAttention', SearchAttributeType.BOOL),
  /** On a follow-up run (a refund that failed after its run finished): the run it follows up. */
  followUpOf: defineSearchAttributeKey('RefundFollowUpOf', SearchAttributeType.KEYWORD),
};

export const REFUND_REASONS = ['requested_by_customer', 'duplicate', 'fraudulent'] as const;

const idPattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const refundRequestSchema = z
  .object({
    orderId: z.string().regex(idPattern, 'must be 1-64 letters, digits, "_" or "-", starting with a letter or digit'),
    amount: z.number().int('must be a whole number of minor units (e.g. cents)').positive('must be greater than 0').max(99_999_999),
    // "EUR" and "eur" are one currency: normalized, never refused for its case.
    currency: z.string().trim().toLowerCase().regex(/^[a-z]{3}$/, 'must be a three-letter ISO code such as "usd"'),
    reason: z.enum(REFUND_REASONS).default('requested_by_customer'),
    requestedBy: z.string().trim().min(1, 'must name who asked for the refund').max(200),
    /** A changed intent for the same order is a new operation version, never a disguised retry. */
    operationVersion: z.number().int().positive().max(1000).default(1),
  })
  .strict();

export type RefundRequest = z.output<typeof refundRequestSchema>;
export type RefundRequestInput = z.input<typeof refundRequestSchema>;

/** Parses a refund request, throwing an error that names every bad field. Changes nothing. */
export function parseRefundRequest(input: unknown): RefundRequest {
  const result = refundRequestSchema.safeParse(input);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || '(request)'}: ${i.message}`);
    throw new InvalidRefundRequestError(`invalid refund request: ${problems.join('; ')}`);
  }
  return result.data;
}

/**
 * How `existing` differs from `request` in what the refund is (amount, currency, reason), as
 * `existing` has it: "amount 900, reason duplicate"; undefined when they are the same intent.
 */
export function changedIntent(existing: RefundRequest, request: RefundRequest): string | undefined {
  const differs = (['amount', 'currency', 'reason'] as const).filter((f) => existing[f] !== request[f]);
  return differs.length ? differs.map((f) => `${f} ${existing[f]}`).join(', ') : undefined;
}

export class InvalidRefundRequestError extends Error {
  override name = 'InvalidRefundRequestError';
}

/** The business key: one workflow id per order and operation version. */
export function refundWorkflowId(orderId: string, operationVersion: number): string {
  return `refund-${orderId}-v${operationVersion}`;
}

export type OrderStatus = 'paid' | 'partially_refunded' | 'refunded';

export interface Order {
  id: string;
  paymentIntentId: string;
  customerEmail: string;
  currency: string;
  amount: number;
  refundedAmount: number;
  status: OrderStatus;
  version: number;
}

export type { NotificationReceipt, OrderReceipt, RefundReceipt } from './receipts';
