// The runs that need a person, straight from Temporal's visibility, a page at a time: ten thousand
// parked runs are read as they come, never all at once.
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../contract';

export const ATTENTION_QUERY = 'RefundNeedsAttention = true';

export type AttentionRun = ReturnType<typeof attentionRun>;

export async function* runsNeedingAttention(client: Client, pageSize = 500) {
  for await (const w of client.workflow.list({ query: ATTENTION_QUERY, pageSize })) yield attentionRun(w);
}

function attentionRun(w: WorkflowExecutionInfo) {
  const sa = w.typedSearchAttributes;
  return {
    workflowId: w.workflowId,
    // RUNNING: it waits for a decision; closed (CANCELED …): a person finishes by hand what it started.
    execution: w.status.name,
    orderId: sa.get(SEARCH_ATTRIBUTES.orderId) ?? null,
    status: sa.get(SEARCH_ATTRIBUTES.status) ?? null,
    step: sa.get(SEARCH_ATTRIBUTES.step) ?? null,
    effect: sa.get(SEARCH_ATTRIBUTES.effect) ?? null,
    verdict: sa.get(SEARCH_ATTRIBUTES.verdict) ?? null,
    startedAt: w.startTime.toISOString(),
  };
}
