// The refund saga's steps as data: what a step's failure leads to, and how each step's
// effect is undone (or repaired forward) when a later step requires it. Imported by
// workflow code, so it stays pure.
import type { RefundActivities } from '../activities';
import { FailureType } from '../reliability/failures';
import type { NotificationReceipt, Order, OrderReceipt, RefundReceipt, RefundRequest } from '../shared';

export const REFUND_STEPS = ['load_order', 'create_refund', 'update_order', 'notify_customer', 'verify_refund'] as const;
export type RefundStep = (typeof REFUND_STEPS)[number];

/** What the saga knows when it compensates: the request and the receipts of finished steps. */
export interface SagaContext {
  request: RefundRequest;
  workflowId: string;
  operationId: string;
  order?: Order;
  refund?: RefundReceipt;
  orderReceipt?: OrderReceipt;
  notice?: NotificationReceipt;
  /** Why compensation is running, in words a customer or operator can read. */
  reason?: string;
}

/** The activities compensations may name; the workflow proxies exactly these for them. */
export type CompensationActivity = 'revertRefund' | 'sendRefundCorrection';
type ActivityInput<A extends CompensationActivity> = Parameters<RefundActivities[A]>[0];

export interface Compensation<A extends CompensationActivity = CompensationActivity> {
  kind: 'compensation';
  activity: A;
  /** Builds the compensation's input; `key` is the compensation's own idempotency key. */
  input(ctx: SagaContext, key: string): ActivityInput<A>;
}

export type Undo = { kind: 'none' } | { kind: 'forward_repair'; note: string } | Compensation;

/**
 * - `stop`: nothing irreversible happened before this step; end the run.
 * - `forward_repair`: the refund already happened and stands; finished steps stay, a person repairs forward.
 */
export type OnFailure = 'stop' | 'forward_repair';

export interface StepRegistration {
  /** What a failure of this step leads to once its retry policy gives up. */
  onFailure: OnFailure;
  /** Failures that prove the step had no effect ('any' for reads). Any other failure leaves its outcome unknown. */
  noEffectOn?: FailureType[] | 'any';
  /** Failures that prove the refund did not go through: finished steps are compensated in reverse order. */
  compensateOn?: FailureType[];
  undo: Undo;
}

function compensation<A extends CompensationActivity>(activity: A, input: (ctx: SagaContext, key: string) => ActivityInput<A>): Compensation {
  return { kind: 'compensation', activity, input } as Compensation;
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`compensation needs ${what}, which the saga does not have`);
  return value;
}

export const REFUND_SAGA: Record<RefundStep, StepRegistration> = {
  load_order: { onFailure: 'stop', noEffectOn: 'any', undo: { kind: 'none' } },
  create_refund: {
    onFailure: 'stop',
    // Only an explicit refusal proves no refund exists; a timeout, a 5xx or a reused key does not.
    noEffectOn: [FailureType.PaymentRejected, FailureType.PermissionDenied],
    undo: {
      kind: 'forward_repair',
      note: 'a refund cannot be undone: later steps are repaired forward, and a refund is never sent again',
    },
  },
  update_order: {
    onFailure: 'forward_repair',
    undo: compensation('revertRefund', (ctx, key) => ({
      orderId: ctx.request.orderId,
      operationId: ctx.operationId,
      compensationKey: key,
    })),
  },
  notify_customer: {
    onFailure: 'forward_repair',
    undo: compensation('sendRefundCorrection', (ctx, key) => ({
      key,
      orderId: ctx.request.orderId,
      to: need(ctx.order, 'the order').customerEmail,
      refundId: need(ctx.refund, 'the refund receipt').refundId,
      reason: ctx.reason ?? 'the refund did not go through',
    })),
  },
  // Only the provider's own word that the refund failed undoes anything; an unverified refund stands.
  verify_refund: { onFailure: 'forward_repair', compensateOn: [FailureType.RefundFailed], undo: { kind: 'none' } },
};
