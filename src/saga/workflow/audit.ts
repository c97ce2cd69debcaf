// What a run leaves beside its operation's evidence in the store: its status, a decision and who took
// it, by key. A convenience beside the run's own state: a run that cannot write it still goes on.
import { isCancellation } from '@temporalio/workflow';
import type { RecordOutcomeInput } from '../../activities/operations';
import type { DecisionRecord } from '../../contract';
import { pooledActivities } from '../../workflows/pools';
import { BOOKKEEPING } from './activity-options';

/** Who decided, by key (a name alone proves nothing; null: unsigned), and who approved it. */
export function decisionDetail(
  run: { desk: { records: DecisionRecord[] } },
  record: DecisionRecord,
): Record<string, unknown> {
  const approval = run.desk.records.find((r) => r.answers === record.seq && r.decision === 'approve');
  return {
    decision: record.decision,
    by: record.by,
    seq: record.seq,
    keyId: record.keyId ?? null,
    ...(approval && {
      approvedBy: approval.by,
      approvalReason: approval.reason,
      approvedByKeyId: approval.keyId ?? null,
    }),
  };
}

/** Leaves the run's status, or a decision, beside the operation's evidence in the store; a run that cannot do so still goes on. */
export async function audit(
  run: { operationId: string },
  status: string,
  reason: string,
  failedStep: string | null,
  event?: RecordOutcomeInput['event'],
  detail?: Record<string, unknown>,
): Promise<void> {
  if (!run.operationId) return;
  const { recordOutcome } = pooledActivities<{ recordOutcome(input: RecordOutcomeInput): Promise<unknown> }>(
    BOOKKEEPING,
  );
  try {
    await recordOutcome({
      operationId: run.operationId,
      status,
      reason,
      failedStep,
      ...(event && { event }),
      ...(detail && { detail }),
    });
  } catch (err) {
    // The run's own state keeps the verdict; the audit entry is a convenience. A cancellation still propagates.
    if (isCancellation(err)) throw err;
  }
}
