// The runs that need a person, straight from Temporal's visibility, a page at a time: ten thousand
// parked runs are read as they come, never all at once.
import type { Client } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../contract';

export interface AttentionRun {
  workflowId: string;
  /** RUNNING: it waits for a decision; closed (CANCELED …): a person finishes by hand what it started. */
  execution: string;
  orderId: string | null;
  status: string | null;
  step: string | null;
  effect: string | null;
  verdict: string | null;
  startedAt: string;
}

export const ATTENTION_QUERY = 'RefundNeedsAttention = true';

export async function* runsNeedingAttention(client: Client, pageSize = 500): AsyncGenerator<AttentionRun> {
  for await (const w of client.workflow.list({ query: ATTENTION_QUERY, pageSize })) {
    const sa = w.typedSearchAttributes;
    yield {
      workflowId: w.workflowId,
      execution: w.status.name,
      orderId: sa.get(SEARCH_ATTRIBUTES.orderId) ?? null,
      status: sa.get(SEARCH_ATTRIBUTES.status) ?? null,
      step: sa.get(SEARCH_ATTRIBUTES.step) ?? null,
      effect: sa.get(SEARCH_ATTRIBUTES.effect) ?? null,
      verdict: sa.get(SEARCH_ATTRIBUTES.verdict) ?? null,
      startedAt: w.startTime.toISOString(),
    };
  }
}
