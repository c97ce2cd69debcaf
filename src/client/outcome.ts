// Waiting for a refund run from outside: it ends with a result, or parks for a person and waits;
// a caller must not wait forever on a run that waits for them.
import type { WorkflowHandle } from '@temporalio/client';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import {
  SEARCH_ATTRIBUTES,
  stepsQuery,
  type RefundResult,
  type RefundRunState,
  type RefundWorkflow,
} from '../contract';

export type RunOutcome = { kind: 'result'; result: RefundResult } | { kind: 'parked'; state: RefundRunState };

const PARKED = new Set(['needs_attention', 'awaiting_approval']);

/** The longest wait between two looks at a run's status once the first is made: a caller hears of a park within it. */
const LATER_LOOKS_MS = 2000;

/**
 * The run's result, or its state once it parks. The result comes from a long poll on the run's close;
 * for parking it reads the run's RefundStatus search attribute, which the server answers from the
 * run's own record (describe): watching costs the worker nothing and never touches a workflow task in
 * flight. It looks first after `pollMs`, then backs off to every 2 × `pollMs`, at most LATER_LOOKS_MS
 * (or `pollMs` if longer): a run parks only once a step has failed for good, and a slow run's later
 * looks were most of its calls. Only a run shown parked is asked for its step table (a Query, which
 * needs a worker: until one answers, it just waits). With `signal`, stops waiting when it is aborted
 * (and rejects).
 */
export async function outcomeOf(handle: WorkflowHandle<RefundWorkflow>, pollMs = 1000, signal?: AbortSignal) {
  // Aborted once the wait is over: every call is cancelled, and none begins; nothing is left waiting on the connection.
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
    // A call begun on a signal already aborted would never be cancelled: none is begun once the wait is over.
    if (waiting.signal.aborted) return Promise.reject(new Error('stopped waiting'));
    const own = new AbortController();
    const abort = () => own.abort();
    waiting.signal.addEventListener('abort', abort, { once: true });
    return handle.client.connection
      .withAbortSignal(own.signal, fn)
      .finally(() => waiting.signal.removeEventListener('abort', abort));
  };
  /** The run's close event, once it has closed: one long poll at a time, each a call of its own (handle.result() makes them all on one signal). */
  const closed = async (): Promise<temporal.api.history.v1.IHistoryEvent> => {
    let nextPageToken: Uint8Array | undefined;
    for (;;) {
      const { history, nextPageToken: next } = await call(() =>
        handle.client.workflowService.getWorkflowExecutionHistory({
          namespace: handle.client.options.namespace,
          execution: { workflowId: handle.workflowId },
          waitNewEvent: true,
          historyEventFilterType: temporal.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
          skipArchival: true,
          nextPageToken,
        }),
      );
      const event = history?.events?.[0];
      if (event) return event;
      nextPageToken = next ?? undefined;
    }
  };
  const result = (async (): Promise<RunOutcome> => {
    // A failed long poll is left to the SDK's own wait, which asks again and throws its typed error (not found …).
    const event = await closed().catch(() => undefined);
    // A completed run's result is in its close event: decoded here, it costs no second call. Any other
    // ending (failed, terminated, continued as new …) is left to the SDK, which throws its typed error.
    const completed = event?.workflowExecutionCompletedEventAttributes;
    if (completed) {
      const [value] = await decodeArrayFromPayloads(
        handle.client.options.loadedDataConverter,
        completed.result?.payloads,
      );
      return { kind: 'result', result: value as RefundResult };
    }
    return { kind: 'result', result: await call(() => handle.result()) };
  })();
  const parked = (async (): Promise<RunOutcome> => {
    // A run just started is not parked yet: the first look waits a poll.
    await new Promise((r) => setTimeout(r, pollMs));
    const laterMs = Math.max(pollMs, Math.min(2 * pollMs, LATER_LOOKS_MS));
    while (!waiting.signal.aborted) {
      const described = await call(() => handle.describe()).catch(() => undefined);
      const status = described?.typedSearchAttributes.get(SEARCH_ATTRIBUTES.status);
      // A closed run's last status may still say parked (cancelled while it waited): its result tells how it ended.
      if (described?.status.name === 'RUNNING' && status !== undefined && PARKED.has(status)) {
        const state = await call(() => handle.query(stepsQuery)).catch(() => undefined);
        if (state && PARKED.has(state.status)) return { kind: 'parked', state };
      }
      await new Promise((r) => setTimeout(r, laterMs));
    }
    return new Promise<RunOutcome>(() => undefined);
  })();
  try {
    return await Promise.race([result, parked, aborted]);
  } finally {
    signal?.removeEventListener('abort', stop);
    waiting.abort();
    result.catch(() => undefined);
  }
}
