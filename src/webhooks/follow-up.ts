// Starts (or signals) an operation's follow-up run: a refund that failed after the run that made
// it finished. Used by the webhook receiver, and by a run that ends while it holds such news.
import type { Client } from '@temporalio/client';
import { SEARCH_ATTRIBUTES, TASK_QUEUE } from '../shared';
import { followUpWorkflowId, type followUpWorkflow } from '../workflows/follow-up';
import { providerEventSignal, type ProviderEventSummary } from '../workflows/provider-events';

export async function startFollowUp(
  client: Client,
  handover: { operationId: string; originalWorkflowId: string; event: ProviderEventSummary; taskQueue?: string },
): Promise<{ workflowId: string; runId: string }> {
  const workflowId = followUpWorkflowId(handover.operationId);
  const handle = await client.workflow.signalWithStart<typeof followUpWorkflow, [ProviderEventSummary]>('followUpWorkflow', {
    workflowId,
    taskQueue: handover.taskQueue ?? TASK_QUEUE,
    args: [{ operationId: handover.operationId, refundId: handover.event.refundId, originalWorkflowId: handover.originalWorkflowId }],
    signal: providerEventSignal,
    signalArgs: [handover.event],
    typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.followUpOf, value: handover.originalWorkflowId }],
  });
  return { workflowId, runId: handle.signaledRunId };
}
