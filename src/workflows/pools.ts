// Which pool each activity runs in (see ACTIVITY_POOLS): side effects on the providers, the order
// or the queue in one, reconciliation, reads and bookkeeping in the other. Runs whose history
// predates the bulkheads keep scheduling on the workflow's own task queue (patched()).
import { patched, proxyActivities, workflowInfo, type ActivityOptions } from '@temporalio/workflow';
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
        const taskQueue = queueOf(name);
        const proxy = proxyActivities<Record<string, (...a: unknown[]) => Promise<unknown>>>(taskQueue ? { ...options, taskQueue } : options);
        return proxy[name]!(...args);
      };
    },
  });
}
