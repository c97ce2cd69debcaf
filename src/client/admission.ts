// Admission control: a new refund is refused while the workers are too far behind, measured
// where the work waits (the backlog Temporal reports for the workflow task queue and for the
// side-effect pool's queue). Decisions, cancellations and reconciliation are never refused: they
// do not pass through here, and they run in pools of their own.
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { poolQueue } from '../shared';

export interface Admission {
  /** The workflow task queue the refund would start on. */
  taskQueue: string;
  /** Refuse while either queue has more tasks waiting than this; 0: admit everything. */
  maxBacklog: number;
}

export interface Backlog {
  taskQueue: string;
  /** Tasks waiting for a worker, as the server estimates them (its figure lags by a few seconds). */
  tasks: number;
  ageSeconds: number;
}

export class AdmissionRejectedError extends Error {
  override name = 'AdmissionRejectedError';
  constructor(
    message: string,
    readonly backlog: Backlog,
  ) {
    super(message);
  }
}

const { TASK_QUEUE_TYPE_WORKFLOW, TASK_QUEUE_TYPE_ACTIVITY } = temporal.api.enums.v1.TaskQueueType;

/** The backlogs new refunds add to: workflow tasks on the task queue, activities in the effects pool. */
export async function backlogs(client: Client, taskQueue: string): Promise<Backlog[]> {
  const queues = [
    { name: taskQueue, type: TASK_QUEUE_TYPE_WORKFLOW },
    { name: poolQueue(taskQueue, 'effects'), type: TASK_QUEUE_TYPE_ACTIVITY },
  ];
  return Promise.all(
    queues.map(async ({ name, type }) => {
      const { stats } = await client.workflowService.describeTaskQueue({ namespace: client.options.namespace, taskQueue: { name }, taskQueueType: type, reportStats: true });
      // No figure is not "no backlog": admission would admit everything without a word.
      if (!stats) throw new Error(`Temporal reported no backlog for task queue ${name} (a server too old for DescribeTaskQueue stats?); ADMISSION_MAX_BACKLOG=0 starts refunds without admission control`);
      return { taskQueue: name, tasks: Number(stats?.approximateBacklogCount ?? 0), ageSeconds: Number(stats?.approximateBacklogAge?.seconds ?? 0) };
    }),
  );
}

/** Throws AdmissionRejectedError, naming the queue and its backlog, when a new refund must wait. */
export async function checkAdmission(client: Client, admission: Admission, what: string): Promise<void> {
  if (admission.maxBacklog <= 0) return;
  const over = (await backlogs(client, admission.taskQueue)).find((b) => b.tasks > admission.maxBacklog);
  if (over) {
    throw new AdmissionRejectedError(
      `${what} not started: task queue ${over.taskQueue} has ${over.tasks} tasks waiting (the oldest for ${over.ageSeconds} s), over the limit of ${admission.maxBacklog} (ADMISSION_MAX_BACKLOG); ` +
        'the workers are behind. Nothing was done: try again later, add workers, or queue it (`npm run refund -- … --queue`) for the refund-batch schedule to start when there is room',
      over,
    );
  }
}
