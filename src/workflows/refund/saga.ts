// The forward saga, top to bottom: load the order and commit the operation's intent → settle
// earlier operations → create the refund (Stripe) → update the order → notify the customer → the
// completion gate. It starts at `from`: a retry-step decision resumes at the step that failed, the
// steps before it keeping their outputs; every step is idempotent, so a reset run replays its receipts too.
import { REFUND_STEPS, type RefundStep } from '../../compensations/registry';
import { type CompletedRefund, stepKey } from '../../contract';
import { completionGate } from './await-provider';
import { settleEarlier } from './fence';
import { createRefund, targetOf } from './refund-effect';
import type { RefundRun } from './run';
import { loadOrder, notifyCustomer, updateOrder } from './steps';

export async function carryOut(
  run: RefundRun,
  from: RefundStep,
  retry: { resendApprovedAt?: string } = {},
): Promise<CompletedRefund> {
  const { request, ctx } = run;
  const due = (step: RefundStep) => REFUND_STEPS.indexOf(step) >= REFUND_STEPS.indexOf(from);
  if (due('load_order') || !run.begin) await loadOrder(run);
  const begin = run.begin!;
  const op = begin.operation;
  const key = (step: RefundStep) => stepKey(op.operationId, step);

  if (due('create_refund')) {
    // An operation whose own refund exists finishes its order update and email whatever came after it.
    if (!op.refund) await settleEarlier(run, begin);
    const refundInput = {
      orderId: request.orderId,
      operationId: op.operationId,
      paymentIntentId: begin.order.paymentIntentId,
      amount: request.amount,
      currency: request.currency,
      reason: request.reason,
      idempotencyKey: key('create_refund'),
    };
    ctx.refund = await createRefund(run, refundInput, targetOf(op.operationId, request, begin.order.paymentIntentId));
    run.operation.noteFirstSend(run.steps.get('create_refund'));
    run.effect = { status: 'refunded', certainty: 'completed', refundId: ctx.refund.refundId };
  }
  const refund = ctx.refund!;
  if (due('update_order')) ctx.orderReceipt = await updateOrder(run, refund.refundId, refund.amount);
  if (due('notify_customer')) ctx.notice = await notifyCustomer(run, refund, retry.resendApprovedAt);

  await completionGate(run, {
    operationId: op.operationId,
    orderId: request.orderId,
    paymentIntentId: begin.order.paymentIntentId,
    refundId: refund.refundId,
    amount: request.amount,
    currency: request.currency,
    noticeKey: key('notify_customer'),
    idempotencyKey: key('create_refund'),
  });
  return {
    workflowId: run.workflowId,
    orderId: request.orderId,
    operationId: op.operationId,
    status: 'completed',
    refund,
    order: ctx.orderReceipt!,
    notification: ctx.notice!,
  };
}
