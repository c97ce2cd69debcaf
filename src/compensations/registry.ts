// The refund saga's steps as data: which dependency each talks to, what a failure after its retry
// policy gave up leads to, and how its effect is undone (or repaired forward) when a later step
// requires it. Imported by workflow code, so it stays pure.
import type { RefundActivities } from '../activities';
import type { CorrectionReason } from '../activities/notifications';
import type { NotificationReceipt, OrderReceipt, RefundReceipt } from '../receipts';
import type { Boundary } from '../reliability/taxonomy';
import type { Order, RefundRequest } from '../shared';

export const REFUND_STEPS = ['load_order', 'create_refund', 'update_order', 'notify_customer', 'completion_gate'] as const;
export type RefundStep = (typeof REFUND_STEPS)[number];

/** What the saga knows when it compensates: the request and the receipts of finished steps. */
export interface SagaContext {
  request: RefundRequest;
  operationId: string;
  order?: Order;
  refund?: RefundReceipt;
  orderReceipt?: OrderReceipt;
  notice?: NotificationReceipt;
  /** Why compensation is running, as the customer may read it. */
  correctionReason?: CorrectionReason;
}

/** The activities compensations may name; the workflow proxies exactly these for them. */
export type CompensationActivity = 'revertRefund' | 'sendRefundCorrection';
type ActivityInput<A extends CompensationActivity> = Parameters<RefundActivities[A]>[0];

export interface Compensation<A extends CompensationActivity = CompensationActivity> {
  kind: 'compensation';
  activity: A;
  boundary: Boundary;
  /** Builds the compensation's input; `key` is the compensation's own idempotency key. */
  input(ctx: SagaContext, key: string): ActivityInput<A>;
}

export type Undo = { kind: 'none' } | { kind: 'forward_repair'; note: string } | Compensation;

export interface StepRegistration {
  /** The dependency the step's activity talks to: its timeouts and retry policy come from the recovery policy for it. */
  boundary: Boundary;
  /**
   * - `stop`: nothing irreversible happened before this step; a failure ends the run.
   * - `forward_repair`: the refund already happened and stands; finished steps stay, a person repairs forward.
   */
  onFailure: 'stop' | 'forward_repair';
  undo: Undo;
}

function compensation<A extends CompensationActivity>(activity: A, boundary: Boundary, input: (ctx: SagaContext, key: string) => ActivityInput<A>): Compensation {
  return { kind: 'compensation', activity, boundary, input } as Compensation;
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`compensation needs ${what}, which the saga does not have`);
  return value;
}

export const REFUND_SAGA: Record<RefundStep, StepRegistration> = {
  load_order: { boundary: 'store', onFailure: 'stop', undo: { kind: 'none' } },
  // The point of no return: once a refund may exist, nothing before it is ever undone and it is never sent again.
  create_refund: {
    boundary: 'stripe',
    onFailure: 'stop',
    undo: { kind: 'forward_repair', note: 'a refund cannot be undone: later steps are repaired forward, and a refund is never sent again' },
  },
  update_order: {
    boundary: 'store',
    onFailure: 'forward_repair',
    undo: compensation('revertRefund', 'store', (ctx, key) => ({ orderId: ctx.request.orderId, operationId: ctx.operationId, compensationKey: key })),
  },
  notify_customer: {
    boundary: 'smtp',
    onFailure: 'forward_repair',
    undo: compensation('sendRefundCorrection', 'smtp', (ctx, key) => ({
      key,
      operationId: ctx.operationId,
      orderId: ctx.request.orderId,
      refundId: need(ctx.refund, 'the refund receipt').refundId,
      reason: ctx.correctionReason ?? 'refund_failed',
    })),
  },
  completion_gate: { boundary: 'stripe', onFailure: 'forward_repair', undo: { kind: 'none' } },
};
