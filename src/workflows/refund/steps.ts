// The saga's steps on our side of the refund: loading the order (which commits the operation's
// intent), what recording the refund on the order and the customer notice are given, and a person's
// confirmation that a notice whose hand-over ended unknown was delivered.
import {
  type BeginResult,
  type DecisionRecord,
  orderUpdateOf,
  type RefundReceipt,
  type RefundStep,
} from '../../contract';
import { CONFIRM_DELIVERED, REFUND_SAGA } from '../../compensations/registry';
import type { Stopped } from '../../saga/workflow/run-stopped';
import type { Resumed } from '../../saga/workflow/desk';
import { approvedRetry, judgedHandOver, stepError, StepFailedError } from '../../saga/workflow/step-failure';
import type { RefundRun } from './run';

/** Loads the order and commits the operation's intent: the run's identity, settings and budgets come from here. */
export async function loadOrder(run: RefundRun): Promise<BeginResult | Stopped<RefundStep>> {
  const { request, steps } = run;
  const begin = await run.calls.step(REFUND_SAGA.load_order, { request });
  run.begin = begin;
  // Its receipt's settings are pinned by the harness: the run's policy and budgets from here.
  const { policy } = run;
  run.operation.begin(begin, request, policy.version);
  // The step table names the policy; how it is pinned is in the activity's result in history.
  const { scope, provider } = begin.settings;
  steps.get('load_order').output = { ...begin, settings: { scope, policyVersion: policy.version, provider } };
  const op = begin.operation;
  run.operationId = op.operationId;
  if (op.refund)
    run.effect = {
      status: op.status === 'partial' ? 'partial' : 'refunded',
      certainty: 'completed',
      refundId: op.refund.refundId,
    };
  if (begin.problem) {
    const error = stepError('PERMANENT_BUSINESS', 'not_executed', 'refund_not_possible', begin.problem);
    steps.fail('load_order', error);
    run.remember('load_order', 'store', error);
    return run.stopFor('load_order', error);
  }
  return begin;
}

/** The order update for `refund` (of this operation, or an earlier one): what was really refunded, under the step's key. */
export const orderUpdate = (run: RefundRun, refund: RefundReceipt, operationId = run.operationId) =>
  orderUpdateOf(run.request.orderId, operationId, refund);

/** The customer notice; a resend a person approved by retrying it carries the hand-over they judged. */
export const notice = (run: RefundRun, refund: RefundReceipt, resumed: Resumed<RefundStep> | null) => ({
  key: run.key('notify_customer'),
  operationId: run.operationId,
  orderId: run.request.orderId,
  amount: refund.amount,
  currency: refund.currency,
  refundId: refund.refundId,
  ...approvedRetry(resumed, 'notify_customer', run.steps.get('notify_customer').error),
});

/**
 * A person looked for the notice whose hand-over ended unknown and found it delivered: the outbox
 * records it as sent on their word, naming them (nothing is sent), and the step completes.
 */
export async function confirmDelivered(run: RefundRun, record: DecisionRecord): Promise<Stopped<RefundStep> | void> {
  const key = run.key('notify_customer');
  const unknown = run.steps.get('notify_customer').error;
  // The person's word is about the hand-over they judged: recorded only while it is still the entry's.
  const { approvedHandOver: judged } = judgedHandOver(unknown);
  const input = { key, operationId: run.operationId, by: record.by, reason: record.reason, judged };
  try {
    run.ctx.notice = await run.calls.step(CONFIRM_DELIVERED, input);
  } catch (err) {
    // A confirmation that recorded nothing leaves the hand-over as unknown as before: that stays the step's
    // error, so the run parks as it was and confirm-delivered or a resend can still settle it.
    if (!(err instanceof StepFailedError) || err.error.certainty !== 'not_executed' || !unknown) throw err;
    run.steps.fail('notify_customer', unknown);
    run.steps.note(
      'notify_customer',
      `confirm-delivered by ${record.by} was not recorded: ${err.error.code}: ${err.error.message}`,
    );
    return run.stopFor('notify_customer', unknown);
  }
  run.steps.note('notify_customer', `delivered, as ${record.by} confirmed: ${record.reason}`);
}
