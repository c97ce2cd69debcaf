// Waiting for a refund run from outside: it ends with a result, or parks for a person and waits;
// a caller must not wait forever on a run that waits for them.
import type { WorkflowHandle } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../shared';
import { stepsQuery, type refundWorkflow, type RefundResult, type RefundRunState } from '../workflows';

export type RunOutcome = { kind: 'result'; result: RefundResult } | { kind: 'parked'; state: RefundRunState };

const PARKED = new Set(['needs_attention', 'awaiting_approval']);

/**
 * The run's result, or its state once it parks. Every `pollMs` it reads the run's RefundStatus
 * search attribute, which the server answers from the run's own record (describe): watching costs
 * the worker nothing and never touches a workflow task in flight. Only a run shown parked is asked
 * for its step table (a Query, which needs a worker: until one answers, it just waits). With
 * `signal`, stops waiting when it is aborted (and rejects).
 */
export async function outcomeOf(handle: WorkflowHandle<typeof refundWorkflow>, pollMs = 1000, signal?: AbortSignal): Promise<RunOutcome> {
  let settled = false;
  // The long poll for the result is cancelled once the run parks: nothing is left waiting on the connection.
  const waiting = new AbortController();
  const aborted = new Promise<never>((_, reject) => {
    if (signal?.aborted) reject(new Error('stopped waiting'));
    signal?.addEventListener('abort', () => reject(new Error('stopped waiting')), { once: true });
  });
  aborted.catch(() => undefined);
  const result = handle.client.connection.withAbortSignal(waiting.signal, () => handle.result()).then((r): RunOutcome => ({ kind: 'result', result: r }));
  const parked = (async (): Promise<RunOutcome> => {
    while (!settled) {
      // Under the same abort as the long poll: a call still retrying when we stop waiting is cancelled, not left on a timer.
      const status = await handle.client.connection
        .withAbortSignal(waiting.signal, () => handle.describe())
        .then((d) => d.typedSearchAttributes.get(SEARCH_ATTRIBUTES.status))
        .catch(() => undefined);
      if (status !== undefined && PARKED.has(status)) {
        const state = await handle.client.connection.withAbortSignal(waiting.signal, () => handle.query(stepsQuery)).catch(() => undefined);
        if (state && PARKED.has(state.status)) return { kind: 'parked', state };
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
    return new Promise<RunOutcome>(() => undefined);
  })();
  try {
    return await Promise.race([result, parked, aborted]);
  } finally {
    settled = true;
    waiting.abort();
    result.catch(() => undefined);
  }
}
