// The refund itself: sent, or (when its outcome is unknown) reconciled with the provider, and what
// each answer means for the run. Resent with the same key only when reconciliation proved no
// refund exists, or inside the key's dedupe window; never blind.
import { REFUND_SAGA } from '../../compensations/registry';
import {
  type BeginResult,
  MAX_RESUBMISSIONS,
  receiptAgainstAsk,
  type RefundReceipt,
  type RefundStep,
  stepKey,
} from '../../contract';
import type { Lookup } from '../../saga/step';
import { sendReconciled } from '../../saga/workflow/reconciled-send';
import { isStopped, Stopped } from '../../saga/workflow/run-stopped';
import type { ReconcileRefundInput } from '../../activities/reconcile-refund';
import { reconcile } from './reconcile';
import type { RefundRun } from './run';
import { orderUpdate } from './steps';
import * as reasons from './stop-reasons';

export function targetOf(
  operationId: string,
  request: { amount: number; currency: string },
  paymentIntentId: string,
): ReconcileRefundInput {
  return {
    operationId,
    paymentIntentId,
    amount: request.amount,
    currency: request.currency,
    idempotencyKey: stepKey(operationId, 'create_refund'),
  };
}

/**
 * Sends the refund and settles what it came to. A failure the provider may have acted on is reconciled, and resent only
 * as reconciliation allows; one for good stops the run as the policy decides; a receipt is checked against what was asked.
 */
export async function sendRefund(
  run: RefundRun,
  { operation, order }: BeginResult,
): Promise<RefundReceipt | Stopped<RefundStep>> {
  const { orderId, reason } = run.request;
  const input = { orderId, reason, ...targetOf(operation.operationId, run.request, order.paymentIntentId) };
  // The create's first request stamps the key's dedupe window, whether it succeeded, failed or was cancelled.
  const noteFirstSend = () => run.operation.noteFirstSend(run.steps.get('create_refund'));
  const sent = await sendReconciled(run, {
    step: 'create_refund',
    send: () =>
      run.calls.step(REFUND_SAGA.create_refund, input).catch((err: unknown) => {
        noteFirstSend();
        throw err;
      }),
    // Asked about when the policy says reconcile, or a retry ran out while the effect was uncertain (a 5xx, a key
    // still in flight), or a refund was made whose receipt could not be kept.
    afterFailure: ({ certainty }) => {
      const action = run.recovery?.action;
      const retried = action === 'retry' || action === 'repair' || certainty === 'completed';
      return action === 'reconcile' || (certainty !== 'not_executed' && retried) ? 'resend-if-absent' : 'fail';
    },
    lookUp: () => settle(run),
  });
  if (isStopped(sent)) return sent;
  if ('failed' in sent) return run.stopFor('create_refund', sent.failed);
  const receipt = await checkReceipt(run, sent.receipt);
  // Only a receipt the run goes on with stamps the window here; one that stops it leaves what the record says.
  if (!isStopped(receipt)) noteFirstSend();
  return receipt;
}

/**
 * Reconciles the create (a refund made whose receipt could not be kept, by its id): found, its receipt; proven absent
 * or still deduplicated, sent again while resubmissions are left. Partial, failed or still unknown stops the run here.
 */
async function settle(run: RefundRun): Promise<Lookup<RefundReceipt> | Stopped<'create_refund'>> {
  const refundId = run.lastFailure?.provider.refundId;
  const settled = await reconcileOwn(run, refundId, true, '; a person decides what happens next');
  if (isStopped(settled)) return settled;
  const { note } = settled;
  if (settled.kind === 'completed') return { kind: 'found', receipt: settled.refund, note };
  if (settled.kind === 'unknown') return atCreate(reasons.refundUnknown(note, run.operationId));
  if (run.reconciliation.resubmissions >= MAX_RESUBMISSIONS)
    return atCreate(reasons.resubmissionsSpent(MAX_RESUBMISSIONS, note));
  run.reconciliation.resubmissions += 1;
  return { kind: 'absent', receipt: null, note };
}

/**
 * Looks up this operation's refund at the provider, by its id when one is known (`mayResubmit`: see reconcile). Partial,
 * the order is repaired to it; failed, nothing was refunded (`failedNext`: what comes of it); either stops the run here.
 */
async function reconcileOwn(run: RefundRun, refundId: unknown, mayResubmit: boolean, failedNext = '') {
  const { operation, order } = run.begin!;
  const target = targetOf(operation.operationId, run.request, order.paymentIntentId);
  const settled = await reconcile(run, typeof refundId === 'string' ? { ...target, refundId } : target, mayResubmit);
  if (settled.kind === 'partial') return partialRefund(run, settled.refund, settled.note);
  if (settled.kind !== 'failed') return settled;
  run.effect = { status: 'failed', certainty: 'completed', refundId: settled.refund.refundId };
  return atCreate(reasons.providerFailed(settled.refund.refundId, settled.note, failedNext));
}

/**
 * A parked run whose refund is unknown looks again (a reconcile decision, or the sweep's): found, the saga goes on from
 * the order update; else it parks again. A person's retry-step (`send`) goes on to send only what the provider proved
 * absent, or with the same key while the provider still deduplicates it.
 */
export async function lookAgain(run: RefundRun, send: boolean): Promise<Stopped<'create_refund'> | void> {
  run.setStatus('reconciling', 'create_refund');
  const settled = await reconcileOwn(run, run.effect.refundId, send);
  if (isStopped(settled)) return settled;
  switch (settled.kind) {
    case 'completed': {
      // Found: its receipt is the step's result, checked like a receipt the create returned.
      run.steps.resolve('create_refund', settled.refund, `receipt from reconciliation: ${settled.note}`);
      run.noteSend(settled.refund);
      run.setStatus('running');
      const refund = await checkReceipt(run, settled.refund);
      if (isStopped(refund)) return refund;
      run.ctx.refund = refund;
      return;
    }
    case 'absent':
    case 'resubmit':
      // Proven absent: nothing was refunded. Sending it now is a person's decision, not the sweep's.
      if (settled.kind === 'absent') run.effect = { status: 'none', certainty: 'not_executed', refundId: null };
      if (!send) return atCreate(reasons.stillAbsent(settled.note));
      run.steps.note('create_refund', settled.note);
      return run.setStatus('running');
    default:
      return atCreate(reasons.stillUnsettled(settled.note));
  }
}

/** The run stops at the refund's creation for a person. */
const atCreate = (reason: string) => new Stopped('needs_attention', reason, 'create_refund');

/** A receipt checked against what was asked: less is partial, failed (on record from an earlier run) or more stops; only a full one goes on. */
async function checkReceipt(run: RefundRun, refund: RefundReceipt): Promise<RefundReceipt | Stopped<'create_refund'>> {
  const { request } = run;
  switch (receiptAgainstAsk(refund, request)) {
    case 'failed':
      run.effect = { status: 'failed', certainty: 'completed', refundId: refund.refundId };
      return atCreate(reasons.receiptFailed(refund));
    case 'partial':
      return partialRefund(run, refund, reasons.partialOf(refund, request));
    case 'more':
      run.effect = { status: 'refunded', certainty: 'completed', refundId: refund.refundId };
      return atCreate(reasons.moreThanAsked(refund, request));
    case 'fits':
      return refund;
  }
}

/** The provider refunded less than asked: the order is repaired forward to it, the email frozen, a person decides the rest. */
export async function partialRefund(run: RefundRun, refund: RefundReceipt, note: string) {
  run.effect = { status: 'partial', certainty: 'partial', refundId: refund.refundId };
  run.ctx.refund = refund;
  run.ctx.partialNote = note;
  run.steps.resolve('create_refund', refund, `partial: ${note}`);
  await run.calls.step(REFUND_SAGA.update_order, orderUpdate(run, refund));
  run.steps.skip(
    'notify_customer',
    'frozen: the refund is partial, and an email now would tell the customer something untrue',
  );
  return atCreate(reasons.partialRefund(note, refund));
}
