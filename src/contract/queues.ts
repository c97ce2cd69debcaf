// Where work goes: the workflow task queue, the activity pools beside it, and the
// workflow types clients start by name (never by function: a client must not load workflow code).

export const TASK_QUEUE = 'refunds';

/**
 * Bulkheads: besides the workflow task queue, activities run in two pools of their own, so that a
 * backlog of new side effects never starves reconciliation, decisions' bookkeeping and reads.
 */
export const ACTIVITY_POOLS = ['effects', 'reconcile'] as const;
export type ActivityPool = (typeof ACTIVITY_POOLS)[number];
/** What a worker process can poll: the workflow task queue, and each activity pool's queue. */
export const WORKER_POOLS = ['workflows', ...ACTIVITY_POOLS] as const;
export type WorkerPool = (typeof WORKER_POOLS)[number];
/** The task queue of a pool beside the workflow task queue `base`: `refunds-effects`, `refunds-reconcile`. */
export const poolQueue = (base: string, pool: ActivityPool) => `${base}-${pool}`;

/** The workflow types, as the worker registers them (each is its function's name in src/workflows/). */
export const REFUND_WORKFLOW = 'refundWorkflow';
export const FOLLOW_UP_WORKFLOW = 'followUpWorkflow';
