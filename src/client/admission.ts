// Admission control: a new refund is refused while the workers are too far behind, measured
// where the work waits (the backlog Temporal reports for the workflow task queue and for the
// side-effect pool's queue). Decisions, cancellations and reconciliation are never refused: they
// do not pass through here, and they run in pools of their own.
import type { Client } from '@temporalio/client';
import { backlogs, type Backlog } from '../temporal/client';

export class AdmissionRejectedError extends Error {
  override name = 'AdmissionRejectedError';
  constructor(
    message: string,
    readonly backlog: Backlog,
  ) {
    super(message);
  }
}

/** Throws AdmissionRejectedError, naming the queue and its backlog, when a new refund must wait. */
export async function checkAdmission(client: Client, taskQueue: string, maxBacklog: number, what: string) {
  const over = (await backlogs(client, taskQueue)).find((b) => b.tasks > maxBacklog);
  if (over)
    throw new AdmissionRejectedError(
      `${what} not started: task queue ${over.taskQueue} has ${over.tasks} tasks waiting (the oldest for ${over.ageSeconds} s), over the limit of ${maxBacklog} (ADMISSION_MAX_BACKLOG); ` +
        'the workers are behind. Nothing was done: try again later, add workers, or queue it (`npm run refund -- … --queue`) for the refund-batch schedule to start when there is room',
      over,
    );
}
