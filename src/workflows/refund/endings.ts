// How a refund run ends beyond what the harness does for every saga: cancelled by an operator, its
// word on a decision to abandon and its undo (the harness's cancellation does the rest), and (after
// any end) the provider's unacted news handed to the follow-up.
import { CancellationScope, isCancellation, workflowInfo } from '@temporalio/workflow';
import type { RefundActivities } from '../../activities';
import { PERSISTENT_BOOKKEEPING } from '../../saga/workflow/activity-options';
import { pooledActivities } from '../pools';
import { compensate } from './compensation';
import type { RefundRun } from './run';
import { cancelledWhile } from './stop-reasons';
import { abandoned } from '../../saga/workflow/harness';
import { Stopped } from '../../saga/workflow/run-stopped';
import type { Cancelling } from '../../saga/workflow/undo-from-state';
import type { RefundStep } from '../../contract';

/** The provider's word that the refund failed, unacted when the run ends, goes to the operation's follow-up run: it asks again and compensates. */
export async function handOverToFollowUp(run: RefundRun): Promise<void> {
  const event = run.news.unactedFailure();
  if (!event) return;
  await CancellationScope.nonCancellable(() =>
    pooledActivities<RefundActivities>(PERSISTENT_BOOKKEEPING)
      .handToFollowUp({ operationId: run.operationId, event, workflowTaskQueue: workflowInfo().taskQueue })
      .catch((err: unknown) => {
        // The event stays in the store, the run's state and inspect, for a person.
        if (isCancellation(err)) throw err;
      }),
  );
}

/** Cancelled by an operator: a refund that did not go through has what stands compensated; one that stands or may stand is left to a person. */
export const cancelled: Cancelling<RefundStep, RefundRun> = {
  abandoned: (record) => `${abandoned(record.by, record.reason)}; cancelled before the run ended`,
  async undo(run, was, resendApprovedAt) {
    const compensation = run.effect.status === 'failed' ? await compensate(run, { resendApprovedAt }) : undefined;
    // A create that had started may be going on at the provider: then it is unknown, never "not sent".
    const sentOrSending = run.steps.get('create_refund').status !== 'pending';
    const effect = run.effect.status !== 'none' ? run.effect.status : sentOrSending ? 'unknown' : 'not sent';
    if (effect === 'unknown') run.effect = { ...run.effect, status: 'unknown', certainty: 'may_have_executed' };
    const compensated = run.steps.table().some((s) => s.compensation?.status === 'completed');
    // Nothing left for anyone: the refund never went out, or it failed and every compensation completed.
    const settled = compensation ? compensation.status === 'compensated' : effect === 'not sent';
    const reason = cancelledWhile(was, effect, compensated, settled, compensation?.reason);
    return new Stopped<RefundStep>(
      settled ? (effect === 'failed' ? 'compensated' : 'stopped') : 'needs_attention',
      reason,
      null,
    );
  },
};
