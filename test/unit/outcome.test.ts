// Waiting for a run from outside (outcomeOf), against a handle that answers the way the SDK does: each
// call made under an abort signal adds a listener to it and never takes it away.
import type { WorkflowHandle } from '@temporalio/client';
import { defaultFailureConverter, defaultPayloadConverter } from '@temporalio/common';
import { getEventListeners } from 'node:events';
import { outcomeOf } from '../../src/client/outcome';
import type { refundWorkflow } from '../../src/workflows';
import type { RefundRunState } from '../../src/contract';

interface FakeRun {
  /** RefundStatus at each describe (the last one stays). */
  statuses: string[];
  /** Empty long polls before the close event; never closes when undefined. */
  closesAfter?: number;
  execution?: string;
  result?: unknown;
  /** The close event carries this result (a completed run); otherwise it carries none, and the SDK's result() is asked. */
  completedWith?: unknown;
}

function fakeRun({
  statuses,
  closesAfter,
  execution = 'RUNNING',
  result = { status: 'completed' },
  completedWith,
}: FakeRun) {
  const signals = new Set<AbortSignal>();
  const calls: string[] = [];
  const state = { status: 'needs_attention' } as RefundRunState;
  let describes = 0;
  let polls = 0;
  const handle = {
    workflowId: 'refund-ord_1-v1',
    client: {
      options: {
        namespace: 'default',
        loadedDataConverter: {
          payloadConverter: defaultPayloadConverter,
          failureConverter: defaultFailureConverter,
          payloadCodecs: [],
        },
      },
      connection: {
        withAbortSignal<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
          signals.add(signal);
          signal.addEventListener('abort', () => undefined);
          return fn();
        },
      },
      workflowService: {
        getWorkflowExecutionHistory: async () => {
          calls.push('long poll');
          await new Promise((r) => setTimeout(r, 2));
          if (closesAfter === undefined || polls++ < closesAfter)
            return { history: { events: [] }, nextPageToken: new Uint8Array([polls]) };
          const completed =
            completedWith === undefined
              ? {}
              : {
                  workflowExecutionCompletedEventAttributes: {
                    result: { payloads: [defaultPayloadConverter.toPayload(completedWith)] },
                  },
                };
          return { history: { events: [{ eventId: 30, ...completed }] } };
        },
      },
    },
    result: async () => {
      calls.push('result');
      return result;
    },
    describe: async () => {
      calls.push('describe');
      const status = statuses[Math.min(describes++, statuses.length - 1)];
      return { status: { name: execution }, typedSearchAttributes: { get: () => status } };
    },
    query: async () => {
      calls.push('query');
      return state;
    },
  } as unknown as WorkflowHandle<typeof refundWorkflow>;
  return { handle, signals, calls, state };
}

test('watches the status without a Query, and asks for the state once the run shows parked', async () => {
  const run = fakeRun({ statuses: ['running', 'running', 'running', 'needs_attention'] });
  expect(await outcomeOf(run.handle, 1)).toEqual({ kind: 'parked', state: run.state });
  expect(run.calls.filter((c) => c !== 'long poll')).toEqual(['describe', 'describe', 'describe', 'describe', 'query']);
});

test('a long wait leaves no listener behind on any signal: each call, long polls included, has its own', async () => {
  const run = fakeRun({ statuses: [...Array<string>(50).fill('running'), 'needs_attention'] });
  await outcomeOf(run.handle, 1);
  expect(run.calls.filter((c) => c === 'describe')).toHaveLength(51);
  expect(run.calls.filter((c) => c === 'long poll').length).toBeGreaterThan(10);
  for (const signal of run.signals) expect(getEventListeners(signal, 'abort').length).toBeLessThanOrEqual(1);
});

test('returns the result once the run closes, and stops watching; a caller signal keeps none of its listeners', async () => {
  const run = fakeRun({ statuses: ['running'], closesAfter: 5 });
  // A caller's signal shared by many waits (the chaos run, the bench) keeps none of their listeners.
  const give = new AbortController().signal;
  expect(await outcomeOf(run.handle, 1, give)).toEqual({ kind: 'result', result: { status: 'completed' } });
  expect(run.calls.filter((c) => c === 'long poll')).toHaveLength(6);
  expect(getEventListeners(give, 'abort')).toHaveLength(0);
  const after = run.calls.length;
  await new Promise((r) => setTimeout(r, 20));
  expect(run.calls.length).toBe(after);
});

test('a closed run whose last status says parked (cancelled while it waited) is not reported parked', async () => {
  const run = fakeRun({
    statuses: ['needs_attention'],
    execution: 'CANCELED',
    closesAfter: 3,
    result: { status: 'stopped' },
  });
  expect(await outcomeOf(run.handle, 1)).toEqual({ kind: 'result', result: { status: 'stopped' } });
  expect(run.calls).not.toContain('query');
});

test('stops when the caller gives up, and begins no call after that', async () => {
  const run = fakeRun({ statuses: ['running'] });
  const give = new AbortController();
  setTimeout(() => give.abort(), 20);
  await expect(outcomeOf(run.handle, 1, give.signal)).rejects.toThrow('stopped waiting');
  const after = run.calls.length;
  await new Promise((r) => setTimeout(r, 30));
  expect(run.calls.length).toBe(after);
});

test("a completed run's result is read from its close event: no second call for it, and a run that ends before the first poll is never described", async () => {
  const run = fakeRun({
    statuses: ['running'],
    closesAfter: 1,
    completedWith: { status: 'completed', refundId: 're_1' },
  });
  expect(await outcomeOf(run.handle, 1000)).toEqual({
    kind: 'result',
    result: { status: 'completed', refundId: 're_1' },
  });
  expect(run.calls).toEqual(['long poll', 'long poll']);
});

test('looks first after pollMs, then backs off to every 2 × pollMs, never more than 2 s apart unless pollMs is longer', async () => {
  jest.useFakeTimers();
  try {
    for (const [pollMs, laterMs] of [
      [100, 200],
      [1000, 2000],
      [1500, 2000],
      [3000, 3000],
    ] as const) {
      const run = fakeRun({ statuses: ['running', 'running', 'needs_attention'] });
      const looks: number[] = [];
      const describe = run.handle.describe.bind(run.handle);
      Object.assign(run.handle, { describe: () => (looks.push(Date.now()), describe()) });
      const start = Date.now();
      const outcome = outcomeOf(run.handle, pollMs);
      await jest.advanceTimersByTimeAsync(pollMs + 2 * laterMs);
      expect(await outcome).toEqual({ kind: 'parked', state: run.state });
      expect(looks.map((t) => t - start)).toEqual([pollMs, pollMs + laterMs, pollMs + 2 * laterMs]);
    }
  } finally {
    jest.useRealTimers();
  }
});
