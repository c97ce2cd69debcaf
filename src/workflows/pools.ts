// Which pool each activity runs in (see ACTIVITY_POOLS): side effects on the providers, the order or the queue in
// one, reconciliation, reads and bookkeeping in the other. A step runs where its definition says (`runs`), a local
// activity included; what is called outside a step, where POOL_OF says.
import { RetryState } from '@temporalio/common';
import {
  ActivityFailure,
  ApplicationFailure,
  proxyActivities,
  proxyLocalActivities,
  TimeoutFailure,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { RefundActivities } from '../activities';
import { poolQueue, type ActivityPool } from '../contract';
import type { Runs } from '../saga/step';
import { activitySummary } from './activity-summaries';

type Calls = Record<string, (...args: unknown[]) => Promise<unknown>>;

/** The pool of each activity called outside a step definition: compensations, bookkeeping and scheduled work. */
const POOL_OF: Partial<Record<keyof RefundActivities, ActivityPool>> = {
  revertRefund: 'effects',
  sendRefundCorrection: 'effects',
  sendDigest: 'effects',
  releaseStock: 'effects',
  refundCharge: 'effects',
  sendCheckoutCorrection: 'effects',
  takeQueued: 'effects',
  recordStarts: 'effects',
  examineFollowUp: 'reconcile',
  standingRecords: 'reconcile',
  handToFollowUp: 'reconcile',
  recordOutcome: 'reconcile',
  listAttention: 'reconcile',
  sweepUnknown: 'reconcile',
  decisionPolicy: 'reconcile',
};

// A step whose definition says `runs: 'local'` runs on the workflow worker, inside the workflow task that needs it
// (committing the intent, applying the refund to the order: our own store, one transaction each, idempotent by
// operation id). Each leaves one marker in the history instead of an activity's three events and the workflow task
// after it. Its attempts are counted by the worker running it, so a worker that dies mid-retry leaves the next one
// to start counting again: only steps that spend no provider call run locally.
function runLocally(name: string, options: ActivityOptions, args: unknown[]): Promise<unknown> {
  const { startToCloseTimeout, scheduleToCloseTimeout, retry, summary } = options;
  const local = proxyLocalActivities<Calls>({ startToCloseTimeout, scheduleToCloseTimeout, retry, summary });
  return local[name]!(...args).catch((err: unknown) => {
    // A local activity's failure arrives bare, not in the ActivityFailure a scheduled one comes in: the step runner reads both alike.
    if (err instanceof ApplicationFailure || err instanceof TimeoutFailure)
      throw new ActivityFailure(
        `local activity ${name} failed`,
        name,
        undefined,
        RetryState.RETRY_STATE_UNSPECIFIED,
        'local',
        err,
      );
    throw err;
  });
}

/**
 * proxyActivities, each call with its summary for the Web UI: where a step's definition says they run (`runs`), or
 * each activity scheduled on its own pool's task queue.
 */
export function pooledActivities<T extends object = RefundActivities>(defaults: ActivityOptions, runs?: Runs): T {
  return new Proxy({} as T, {
    get(_, name) {
      if (typeof name !== 'string') return undefined;
      return (...args: unknown[]) => {
        const summary = activitySummary(name, args);
        const options = summary === undefined ? defaults : { ...defaults, summary };
        if (runs === 'local') return runLocally(name, options, args);
        const pool = runs ?? POOL_OF[name as keyof RefundActivities];
        const taskQueue = pool && poolQueue(workflowInfo().taskQueue, pool);
        return proxyActivities<Calls>(taskQueue ? { ...options, taskQueue } : options)[name]!(...args);
      };
    },
  });
}
