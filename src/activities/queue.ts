// What a batch occurrence does to the refund queue: take the oldest queued requests, then record
// per request the run it started or why it could not start one (the request then stays queued).
import type { QueuedRequest, RefundQueue } from '../store/types';

export interface StartRecord {
  id: number;
  workflowId: string;
  /** started: by this occurrence; already: a run under its business key existed; failed: stays queued. */
  outcome: 'started' | 'already' | 'failed';
  reason?: string;
}

export type QueueActivities = ReturnType<typeof createQueueActivities>;

export function createQueueActivities(deps: { queue: RefundQueue }) {
  return {
    async takeQueued(input: { limit: number }): Promise<QueuedRequest[]> {
      return deps.queue.next(input.limit);
    },

    async recordStarts(input: { occurrenceId: string; records: StartRecord[] }): Promise<void> {
      for (const r of input.records) {
        if (r.outcome === 'failed') await deps.queue.markNotStarted(r.id, `${input.occurrenceId}: ${r.reason ?? 'not started'}`);
        else await deps.queue.markStarted(r.id, r.workflowId, input.occurrenceId);
      }
    },
  };
}
