// Which pool each activity runs in (see ACTIVITY_POOLS): side effects on the providers, the order
// or the queue in one, reconciliation, reads and bookkeeping in the other. Runs whose history
// predates the bulkheads keep scheduling on the workflow's own task queue (patched()).
// The steps of a refund's happy path that only touch our own store or read the provider back run
// as local activities, inside the workflow task (patched() again): see LOCAL_STEPS.
import { ActivityFailure, ApplicationFailure, patched, proxyActivities, proxyLocalActivities, TimeoutFailure, workflowInfo, type ActivityOptions } from '@temporalio/workflow';
import { RetryState } from '@temporalio/common';
import type { RefundActivities } from '../activities';
import { poolQueue, type ActivityPool } from '../shared';

export const BULKHEADS_PATCH = 'bulkheads-v1';

export const POOL_OF: Record<keyof RefundActivities, ActivityPool> = {
  beginOperation: 'effects',
  createRefund: 'effects',
  applyRefund: 'effects',
  revertRefund: 'effects',
  sendRefundNotice: 'effects',
  sendRefundCorrection: 'effects',
  sendDigest: 'effects',
  takeQueued: 'effects',
  recordStarts: 'effects',
  reconcileRefund: 'reconcile',
  checkCompletion: 'reconcile',
  examineLateFailure: 'reconcile',
  handToFollowUp: 'reconcile',
  recordOutcome: 'reconcile',
  listAttention: 'reconcile',
  sweepUnknown: 'reconcile',
  decisionPolicy: 'reconcile',
};

export const LOCAL_STEPS_PATCH = 'local-steps-v1';

/**
 * Run on the workflow worker, inside the workflow task that needs them: committing the intent and
 * applying the refund to the order (our own store, idempotent by operation id) and the completion
 * gate (reads). Each leaves one marker in the history instead of an activity's three events and the
 * workflow task that follows, and costs no trip through a task queue. Their timeouts, retries and
 * budgets are the policy's, as for any activity. The provider's effects (the refund, the emails)
 * stay activities in the effects pool: a slow provider never holds a workflow task.
 */
export const LOCAL_STEPS: ReadonlySet<string> = new Set<keyof RefundActivities>(['beginOperation', 'applyRefund', 'checkCompletion']);

function queueOf(name: string): string | undefined {
  const pool = POOL_OF[name as keyof RefundActivities];
  if (!pool || !patched(BULKHEADS_PATCH)) return undefined;
  return poolQueue(workflowInfo().taskQueue, pool);
}

/** proxyActivities, each activity scheduled on its pool's task queue. */
export function pooledActivities<T extends object = RefundActivities>(options: ActivityOptions): T {
  return new Proxy({} as T, {
    get(_, name) {
      if (typeof name !== 'string') return undefined;
      return (...args: unknown[]) => {
        if (LOCAL_STEPS.has(name) && patched(LOCAL_STEPS_PATCH)) {
          const { startToCloseTimeout, scheduleToCloseTimeout, retry } = options;
          const local = proxyLocalActivities<Record<string, (...a: unknown[]) => Promise<unknown>>>({ startToCloseTimeout, scheduleToCloseTimeout, retry });
          return local[name]!(...args).catch((err: unknown) => {
            // A local activity's failure arrives bare, without the ActivityFailure a scheduled one comes in: the step runner reads both alike.
            if (err instanceof ApplicationFailure || err instanceof TimeoutFailure) throw new ActivityFailure(`local activity ${name} failed`, name, undefined, RetryState.RETRY_STATE_UNSPECIFIED, 'local', err);
            throw err;
          });
        }
        const taskQueue = queueOf(name);
        const proxy = proxyActivities<Record<string, (...a: unknown[]) => Promise<unknown>>>(taskQueue ? { ...options, taskQueue } : options);
        return proxy[name]!(...args);
      };
    },
  });
}
