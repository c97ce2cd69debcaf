// A batch occurrence's work on the refund queue: take the oldest requests, then record each one's run or why none.
import type { Client } from '@temporalio/client';
import { log } from '@temporalio/activity';
import { backlogs, startedWith } from '../temporal/client';
import { changedIntent } from '../domain/refund-request';
import type { QueuedRequest, RefundQueue } from '../store';
import { activityMetrics, type ActivityMetrics } from './activity-metrics';

export interface StartRecord {
  id: number;
  workflowId: string;
  /** started: by this occurrence; already: a run under its business key existed; failed: stays queued. */
  outcome: 'started' | 'already' | 'failed';
  reason?: string;
  /** For `already`: the request, to compare with what the run under its key was started with. */
  request?: QueuedRequest['request'];
}

export type QueueActivities = ReturnType<typeof createQueueActivities>;

export function createQueueActivities(deps: {
  queue: RefundQueue;
  temporal?: Client;
  maxBacklog?: number;
  metrics?: ActivityMetrics;
}) {
  const metrics = deps.metrics ?? activityMetrics();
  /** How many new refunds the queues have room for under the admission limit (Infinity: no limit here). */
  const room = async (taskQueue: string | undefined): Promise<number> => {
    if (!deps.temporal || !taskQueue || !deps.maxBacklog) return Infinity;
    try {
      const worst = Math.max(...(await backlogs(deps.temporal, taskQueue)).map((b) => b.tasks));
      return Math.max(0, deps.maxBacklog - worst);
    } catch (err) {
      // Not knowing the backlog, this occurrence starts nothing: the requests wait, queued, for the next.
      log.warn(
        `admission: the backlog of ${taskQueue} could not be read (${(err as Error).message}); no queued request is taken this time`,
      );
      return 0;
    }
  };

  /** Why a run that already holds the request's business key does not carry out this request, if it does not. */
  const otherIntent = async (r: StartRecord, request: QueuedRequest['request']): Promise<string | undefined> => {
    if (!deps.temporal) return `${r.workflowId} already exists and this worker cannot read what it was started with`;
    let existing: QueuedRequest['request'];
    try {
      existing = await startedWith(deps.temporal, r.workflowId);
    } catch (err) {
      return `${r.workflowId} already exists, and what it was started with cannot be read: ${(err as Error).message}`;
    }
    const was = changedIntent(existing, request);
    return was && `${r.workflowId} already exists with ${was}: this request needs a new operation version`;
  };

  return {
    /** Takes the oldest queued requests, as many as the admission limit leaves room for: the rest wait, queued, for a later occurrence. */
    async takeQueued(input: { limit: number; taskQueue?: string }): Promise<QueuedRequest[]> {
      const limit = Math.min(input.limit, await room(input.taskQueue));
      if (limit < input.limit) {
        log.warn(
          `admission: taking ${limit} of up to ${input.limit} queued requests; task queue ${input.taskQueue} is over ADMISSION_MAX_BACKLOG ${deps.maxBacklog}, the rest stay queued`,
        );
        metrics().admissionRefused();
      }
      return limit > 0 ? deps.queue.next(limit) : [];
    },

    /** Records each start; a request whose key is held by a run with another intent is refused for good, and returned. */
    async recordStarts(input: { occurrenceId: string; records: StartRecord[] }) {
      const conflicts: { id: number; workflowId: string; reason: string }[] = [];
      for (const r of input.records) {
        const conflict = r.outcome === 'already' && r.request ? await otherIntent(r, r.request) : undefined;
        if (conflict) conflicts.push({ id: r.id, workflowId: r.workflowId, reason: conflict });
        // Another run holds its business key: it can never start as it is, and must not block the queue.
        if (conflict) await deps.queue.markRefused(r.id, `${input.occurrenceId}: ${conflict}`);
        else if (r.outcome === 'failed')
          await deps.queue.markNotStarted(r.id, `${input.occurrenceId}: ${r.reason ?? 'not started'}`);
        else await deps.queue.markStarted(r.id, r.workflowId, input.occurrenceId);
      }
      return { conflicts };
    },
  };
}
