// A batch occurrence: takes up to `limit` queued refund requests and starts one refund workflow
// per request under its business key. The refunds outlive the occurrence (parent-close ABANDON).
// Re-run or redelivered, it finds the requests it started marked started, and a run it started
// but did not record is found by its workflow id; the refund's own identity is the operation, so
// even a run under another id refunds nothing twice.
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { ParentClosePolicy, startChild, workflowInfo } from '@temporalio/workflow';
import { pooledActivities } from './pools';
import type { QueueActivities, StartRecord } from '../activities/queue';
import { refundWorkflowId, runDetails, runSummary, SEARCH_ATTRIBUTES } from '../contract';
import { currentOccurrence, wholeNumber } from './occurrence';
import { refusePlaintext } from '../saga/workflow/messages';
import { refundWorkflow } from './refund/workflow';

export interface BatchInput {
  /** At most this many requests per occurrence (1-1000). */
  limit: number;
}

export interface BatchResult {
  occurrenceId: string;
  taken: number;
  started: string[];
  alreadyStarted: string[];
  notStarted: { workflowId: string; reason: string }[];
}

const { takeQueued, recordStarts } = pooledActivities<QueueActivities>({
  startToCloseTimeout: '30s',
  retry: { maximumAttempts: 10 },
});

export async function batchRefundsWorkflow(input: BatchInput): Promise<BatchResult> {
  refusePlaintext(input);
  const limit = wholeNumber('limit', input?.limit, 1, 1000);
  const occurrence = currentOccurrence();
  // The activity takes fewer when the workers are behind (admission control): the rest wait, queued.
  const taken = await takeQueued({ limit, taskQueue: workflowInfo().taskQueue });
  const records: StartRecord[] = [];
  for (const { id, request } of taken) {
    const workflowId = refundWorkflowId(request.orderId, request.operationVersion);
    try {
      await startChild(refundWorkflow, {
        workflowId,
        args: [request],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.orderId, value: request.orderId }],
        staticSummary: runSummary(request),
        staticDetails: runDetails(request, workflowId),
      });
      records.push({ id, workflowId, outcome: 'started' });
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError)
        records.push({ id, workflowId, outcome: 'already', request });
      else
        records.push({ id, workflowId, outcome: 'failed', reason: err instanceof Error ? err.message : String(err) });
    }
  }
  const { conflicts } = await recordStarts({ occurrenceId: occurrence.id, records });
  const conflicting = new Set(conflicts.map((c) => c.id));
  return {
    occurrenceId: occurrence.id,
    taken: taken.length,
    started: records.filter((r) => r.outcome === 'started').map((r) => r.workflowId),
    alreadyStarted: records.filter((r) => r.outcome === 'already' && !conflicting.has(r.id)).map((r) => r.workflowId),
    notStarted: [
      ...records
        .filter((r) => r.outcome === 'failed')
        .map((r) => ({ workflowId: r.workflowId, reason: r.reason ?? '' })),
      ...conflicts.map((c) => ({ workflowId: c.workflowId, reason: c.reason })),
    ],
  };
}
