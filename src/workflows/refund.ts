// The refund saga: load order → create refund (Stripe) → update order → notify customer →
// verify the refund with the provider. Deterministic: every effect happens in an activity.
import {
  ApplicationFailure,
  defineQuery,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { RefundActivities } from '../activities';
import { REFUND_SAGA, REFUND_STEPS, type CompensationActivity, type RefundStep, type SagaContext } from '../compensations/registry';
import { NON_RETRYABLE_FAILURES, type FailureType } from '../reliability/failures';
import { compensationKey, stepKey } from '../reliability/keys';
import {
  parseRefundRequest,
  SEARCH_ATTRIBUTES,
  type NotificationReceipt,
  type Order,
  type OrderReceipt,
  type RefundReceipt,
  type RefundRequest,
  type RefundRequestInput,
} from '../shared';
import { StepFailedError, StepRunner, type StepError, type StepRecord } from './step-runner';

export type RunStatus = 'running' | 'completed' | 'rejected' | 'compensating' | 'compensated' | 'needs_attention';

export interface RefundRunState {
  workflowId: string;
  request: RefundRequest;
  status: RunStatus;
  /** Why the run stopped, when it did not complete. */
  outcome?: { failedStep: RefundStep; error: StepError; reason: string };
  steps: StepRecord[];
}

export interface RefundResult {
  workflowId: string;
  orderId: string;
  status: 'completed';
  refund: RefundReceipt;
  order: OrderReceipt;
  notification: NotificationReceipt;
}

export const stepsQuery = defineQuery<RefundRunState>('steps');

// Activity profiles. Each activity's RetryPolicy is the only retry loop for its call.
const retry = { initialInterval: '1s', backoffCoefficient: 2, nonRetryableErrorTypes: NON_RETRYABLE_FAILURES };
const storeActivity: ActivityOptions = {
  startToCloseTimeout: '10s',
  scheduleToCloseTimeout: '2m',
  retry: { ...retry, maximumInterval: '10s', maximumAttempts: 5 },
};
const paymentActivity: ActivityOptions = {
  startToCloseTimeout: '30s',
  scheduleToCloseTimeout: '5m',
  retry: { ...retry, maximumInterval: '30s', maximumAttempts: 5 },
};
const verifyActivity: ActivityOptions = {
  startToCloseTimeout: '30s',
  scheduleToCloseTimeout: '10m',
  retry: { ...retry, initialInterval: '2s', maximumInterval: '1m', maximumAttempts: 10 },
};
const mailActivity: ActivityOptions = {
  startToCloseTimeout: '30s',
  scheduleToCloseTimeout: '5m',
  retry: { ...retry, maximumInterval: '30s', maximumAttempts: 5 },
};

const store = proxyActivities<RefundActivities>(storeActivity);
const payments = proxyActivities<RefundActivities>(paymentActivity);
const verification = proxyActivities<RefundActivities>(verifyActivity);
const mail = proxyActivities<RefundActivities>(mailActivity);
const compensationActivities: Pick<RefundActivities, CompensationActivity> = {
  revertRefund: store.revertRefund,
  sendRefundCorrection: mail.sendRefundCorrection,
};

export async function refundWorkflow(input: RefundRequestInput): Promise<RefundResult> {
  let request: RefundRequest;
  try {
    request = parseRefundRequest(input);
  } catch (err) {
    throw ApplicationFailure.nonRetryable((err as Error).message, 'INVALID_INPUT');
  }
  const { workflowId } = workflowInfo();
  const ctx: SagaContext = { request, workflowId, operationId: workflowId };
  const steps = new StepRunner(REFUND_STEPS);
  const state: Omit<RefundRunState, 'steps'> = { workflowId, request, status: 'running' };
  setHandler(stepsQuery, () => ({ ...state, steps: steps.table() }));

  const setStatus = (status: RunStatus) => {
    state.status = status;
    upsertSearchAttributes({ [SEARCH_ATTRIBUTES.status.name]: [status] });
  };
  const run = <T>(step: RefundStep, stepInput: unknown, key: string | undefined, call: () => Promise<T>) => {
    upsertSearchAttributes({ [SEARCH_ATTRIBUTES.step.name]: [step] });
    return steps.run(step, stepInput, key, call);
  };
  const key = (step: RefundStep) => stepKey(workflowId, step, request.operationVersion);
  upsertSearchAttributes({ [SEARCH_ATTRIBUTES.orderId.name]: [request.orderId], [SEARCH_ATTRIBUTES.status.name]: ['running'] });

  try {
    const order = await run('load_order', { orderId: request.orderId }, undefined, () => store.getOrder(request.orderId));
    ctx.order = order;
    const problem = refundProblem(order, request);
    if (problem) steps.fail('load_order', { type: 'INVALID_INPUT', message: problem, nonRetryable: true });

    const refundInput = {
      orderId: order.id,
      operationId: ctx.operationId,
      paymentIntentId: order.paymentIntentId,
      amount: request.amount,
      currency: request.currency,
      reason: request.reason,
      idempotencyKey: key('create_refund'),
    };
    ctx.refund = await run('create_refund', refundInput, refundInput.idempotencyKey, () => payments.createRefund(refundInput));

    const orderInput = { orderId: order.id, operationId: ctx.operationId, refundId: ctx.refund.refundId, amount: ctx.refund.amount };
    ctx.orderReceipt = await run('update_order', orderInput, ctx.operationId, () => store.applyRefund(orderInput));

    const noticeInput = {
      key: key('notify_customer'),
      orderId: order.id,
      to: order.customerEmail,
      amount: ctx.refund.amount,
      currency: ctx.refund.currency,
      refundId: ctx.refund.refundId,
    };
    ctx.notice = await run('notify_customer', noticeInput, noticeInput.key, () => mail.sendRefundNotice(noticeInput));

    const refundId = ctx.refund.refundId;
    await run('verify_refund', { refundId }, undefined, () => verification.verifyRefund({ refundId }));
    setStatus('completed');
    return { workflowId, orderId: order.id, status: 'completed', refund: ctx.refund, order: ctx.orderReceipt, notification: ctx.notice };
  } catch (err) {
    if (!(err instanceof StepFailedError)) throw err;
    const failedStep = err.step as RefundStep;
    const reason = await handleFailure(failedStep, err.cause);
    state.outcome = { failedStep, error: err.cause, reason };
    throw ApplicationFailure.nonRetryable(`refund ${state.status}: ${reason}`, `REFUND_${state.status.toUpperCase()}`, {
      ...state,
      steps: steps.table(),
    });
  }

  /** Applies the failed step's registration and returns the reason, in words. */
  async function handleFailure(failedStep: RefundStep, error: StepError): Promise<string> {
    const what = `${failedStep} failed with ${error.type}: ${error.message}`;
    const registration = REFUND_SAGA[failedStep];
    if (registration.compensateOn?.includes(error.type as FailureType)) {
      setStatus('compensating');
      ctx.reason = `the refund did not go through (${error.message})`;
      const ok = await compensate();
      setStatus(ok ? 'compensated' : 'needs_attention');
      return ok
        ? `${what}. Finished steps were compensated in reverse order.`
        : `${what}. A compensation failed: see the step table; a person must finish it.`;
    }
    setStatus('needs_attention');
    if (registration.onFailure === 'forward_repair') {
      return `${what}. Refund ${ctx.refund?.refundId} stands and is never sent again; a person must finish ${failedStep}.`;
    }
    const { noEffectOn } = registration;
    if (noEffectOn !== 'any' && !noEffectOn?.includes(error.type as FailureType)) {
      return `${what}. Whether it took effect is unknown: reconcile with the provider by idempotency key ${steps.get(failedStep).idempotencyKey} before any new attempt.`;
    }
    // Retries that ran out on a transient failure need a person; a refusal is final.
    if (error.nonRetryable) setStatus('rejected');
    return `${what}. Nothing was refunded.`;
  }

  async function compensate(): Promise<boolean> {
    let ok = true;
    for (const step of steps.completed().reverse()) {
      const { undo } = REFUND_SAGA[step];
      if (undo.kind === 'forward_repair') steps.markNotCompensable(step, undo.note);
      if (undo.kind !== 'compensation') continue;
      const compKey = compensationKey(steps.get(step).idempotencyKey ?? key(step));
      const activity = compensationActivities[undo.activity] as (i: unknown) => Promise<unknown>;
      ok = (await steps.compensate(step, compKey, () => activity(undo.input(ctx, compKey)))) && ok;
    }
    return ok;
  }
}

/** Why this order cannot take this refund, or undefined when it can. */
export function refundProblem(order: Order, request: RefundRequest): string | undefined {
  if (order.currency !== request.currency) {
    return `order ${order.id} was paid in ${order.currency}, the refund asks for ${request.currency}`;
  }
  const refundable = order.amount - order.refundedAmount;
  if (request.amount > refundable) {
    return `refund of ${request.amount} exceeds the ${refundable} still refundable on order ${order.id}`;
  }
  return undefined;
}
