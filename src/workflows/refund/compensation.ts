// Compensation: when the provider failed the refund after accepting it, on a person's compensate
// decision, or on cancellation, the run undoes what the store shows standing, as the compensation
// plan decides from its records (the same plan and the same runUndo as the follow-up's).
import { CancellationScope, isCancellation } from '@temporalio/workflow';
import type { RefundActivities } from '../../activities';
import { compensationPlan, correctsUnknownNotice } from '../../compensations/plan';
import { REFUND_SAGA } from '../../compensations/registry';
import { standingRecordsSchema, type RefundReceipt } from '../../contract';
import { PERSISTENT_BOOKKEEPING } from '../../saga/workflow/activity-options';
import { undoSteps } from '../../saga/workflow/undo';
import { pooledActivities } from '../pools';
import type { RefundRun } from './run';
import { approvedCorrection } from '../../saga/workflow/step-failure';
import * as reasons from './stop-reasons';
import { Stopped } from '../../saga/workflow/run-stopped';

/** The run stops as its compensation came out, at the completion gate: compensated, or for a person (quarantined when an outcome is unknown). */
type Undone = Stopped<'completion_gate'>;
const undone = (status: Undone['status'], reason: string, quarantined = false): Undone =>
  new Stopped(status, reason, 'completion_gate', quarantined);

/**
 * Undoes what stands, each under its own key, never stopped by a cancellation. One whose outcome was unknown is resent
 * only on a person's decision (`resendApprovedAt`); a notice whose hand-over is unknown is corrected only when the
 * policy or a person allows it, else held: never compensated while the customer may hold an email saying money is coming.
 */
export async function compensate(
  run: RefundRun,
  options: { refund?: RefundReceipt; resendApprovedAt?: string },
): Promise<Undone> {
  if (options.refund) {
    run.effect = { status: 'failed', certainty: 'completed', refundId: options.refund.refundId };
    // A decision or a cancellation keeps the failed refund's receipt and reason: the run's own receipt is the one from creation.
    run.ctx.failedRefund = options.refund;
    run.ctx.correctionReason = options.refund.status === 'canceled' ? 'refund_canceled' : 'refund_failed';
  }
  run.setStatus('compensating', 'completion_gate');
  return CancellationScope.nonCancellable(() => compensateStanding(run, options.resendApprovedAt));
}

async function compensateStanding(run: RefundRun, resendApprovedAt: string | undefined): Promise<Undone> {
  const { operationId } = run;
  const refund = run.ctx.failedRefund;
  for (const step of run.steps.completed()) {
    const { undo } = REFUND_SAGA[step];
    if (undo.kind === 'forward_repair') run.steps.markNotCompensable(step, undo.note);
  }
  const what = reasons.undoneBecause(refund);
  let records;
  try {
    const raw = await pooledActivities<RefundActivities>(PERSISTENT_BOOKKEEPING).standingRecords({
      operationId,
      refundId: refund?.refundId ?? null,
    });
    records = standingRecordsSchema.parse(raw);
  } catch (err) {
    if (isCancellation(err)) throw err;
    return undone('needs_attention', reasons.storeUnreadable(what, (err as Error).message));
  }
  const plan = compensationPlan(
    operationId,
    records,
    correctsUnknownNotice(run.policy, resendApprovedAt !== undefined),
  );
  const ctx = { ...run.ctx, operationId, orderId: run.request.orderId };
  await undoSteps(
    run,
    plan.undo.flatMap(({ step, key }) => {
      const { undo } = REFUND_SAGA[step];
      if (undo.kind !== 'compensation') return [];
      // A correction of unknown outcome is resent only on a person's approval.
      const correction = undo.activity === 'sendRefundCorrection';
      const approval = approvedCorrection(correction ? resendApprovedAt : undefined, run.steps.get(step).compensation);
      return [{ step, key, undo, input: { ...undo.input(ctx, key), ...approval } }];
    }),
  );
  // A compensation that already ran keeps its record (a correction whose outcome is unknown stays quarantined).
  const held = plan.held && run.steps.hold(plan.held.step, plan.held.key, plan.held.reason) ? plan.held : null;

  // Left open: a compensation neither completed nor held for a person's decision.
  const settled = ['completed', 'held'];
  const left = run.steps
    .table()
    .filter(({ compensation: c }) => c?.kind === 'compensation' && !settled.includes(c.status));
  if (left.length === 0 && !held) return undone('compensated', reasons.compensated(what));
  const unknown = left.filter((s) => s.compensation?.status === 'unknown').map((s) => s.name);
  const open = reasons.compensationsOpen(what, unknown, left.length > 0, held?.reason ?? null);
  return undone('needs_attention', open, unknown.length > 0);
}
