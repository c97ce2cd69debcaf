// Waiting for a run from outside (outcomeOf), against a handle that answers the way the SDK does: each
// call made under an abort signal adds a listener to it and never takes it away.
import type { WorkflowHandle } from '@temporalio/client';
import { getEventListeners } from 'node:events';
import { outcomeOf } from '../../src/client/outcome';
import type { refundWorkflow, RefundRunState } from '../../src/workflows';

function fakeRun(statuses: string[], result: Promise<unknown> = new Promise(() => undefined)) {
  const signals = new Set<AbortSignal>();
  const calls: string[] = [];
  const state = { status: 'needs_attention' } as RefundRunState;
  let describes = 0;
  const handle = {
    client: {
      connection: {
        withAbortSignal<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
          signals.add(signal);
          signal.addEventListener('abort', () => undefined);
          return fn();
        },
      },
    },
    result: () => result,
    describe: async () => {
      calls.push('describe');
      const status = statuses[Math.min(describes++, statuses.length - 1)];
      return { typedSearchAttributes: { get: () => status } };
    },
    query: async () => {
      calls.push('query');
      return state;
    },
  } as unknown as WorkflowHandle<typeof refundWorkflow>;
  return { handle, signals, calls, state };
}

test('watches the status without a Query, and asks for the state once the run shows parked', async () => {
  const run = fakeRun(['running', 'running', 'running', 'needs_attention']);
  expect(await outcomeOf(run.handle, 1)).toEqual({ kind: 'parked', state: run.state });
  expect(run.calls).toEqual(['describe', 'describe', 'describe', 'describe', 'query']);
});

test('a long wait leaves no listener behind on any signal: each call has its own', async () => {
  const run = fakeRun([...Array<string>(50).fill('running'), 'needs_attention']);
  await outcomeOf(run.handle, 1);
  expect(run.calls.filter((c) => c === 'describe')).toHaveLength(51);
  for (const signal of run.signals) expect(getEventListeners(signal, 'abort').length).toBeLessThanOrEqual(1);
});

test('returns the result of a run that ends, and stops watching', async () => {
  const run = fakeRun(['running'], Promise.resolve({ status: 'completed' }));
  // A caller's signal shared by many waits (the chaos run, the bench) keeps none of their listeners.
  const give = new AbortController().signal;
  expect(await outcomeOf(run.handle, 1, give)).toEqual({ kind: 'result', result: { status: 'completed' } });
  expect(getEventListeners(give, 'abort')).toHaveLength(0);
  const after = run.calls.length;
  await new Promise((r) => setTimeout(r, 20));
  expect(run.calls.length).toBe(after);
});
