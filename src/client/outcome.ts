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
  let stop = () => undefined as void;
  const aborted = new Promise<never>((_, reject) => {
    stop = () => reject(new Error('stopped waiting'));
    if (signal?.aborted) stop();
    signal?.addEventListener('abort', stop, { once: true });
  });
  aborted.catch(() => undefined);
  /** One call under the wait's abort, on a signal of its own: the SDK adds a listener to the signal of each call and never removes it. */
  const call = <T>(fn: () => Promise<T>): Promise<T> => {
    const own = new AbortController();
    const abort = () => own.abort();
    waiting.signal.addEventListener('abort', abort, { once: true });
    return handle.client.connection.withAbortSignal(own.signal, fn).finally(() => waiting.signal.removeEventListener('abort', abort));
  };
  const result = handle.client.connection.withAbortSignal(waiting.signal, () => handle.result()).then((r): RunOutcome => ({ kind: 'result', result: r }));
  const parked = (async (): Promise<RunOutcome> => {
    while (!settled) {
      // Under the same abort as the long poll: a call still retrying when we stop waiting is cancelled, not left on a timer.
      const status = await call(() => handle.describe())
        .then((d) => d.typedSearchAttributes.get(SEARCH_ATTRIBUTES.status))
        .catch(() => undefined);
      if (status !== undefined && PARKED.has(status)) {
        const state = await call(() => handle.query(stepsQuery)).catch(() => undefined);
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
    signal?.removeEventListener('abort', stop);
    waiting.abort();
    result.catch(() => undefined);
  }
}
