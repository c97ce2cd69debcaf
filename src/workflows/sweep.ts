// The reconciliation sweep: asks the parked runs whose refund is unknown to look again (lookups
// only, nothing is sent), up to `maxRuns` per occurrence, and reports what settled. What stays
// unknown stays parked for a person; the next occurrence takes the runs this one did not reach.
import { pooledActivities } from './pools';
import type { RefundActivities } from '../activities';
import type { SweepReport } from '../activities/sweep';
import { currentOccurrence, refuseUndecodable, wholeNumber } from './occurrence';

export interface SweepOptions {
  /** Runs asked per occurrence (1-1000). */
  maxRuns?: number;
  /** How long to wait for the runs asked to settle (ms, up to 10 minutes). */
  waitMs?: number;
}

const { sweepUnknown } = pooledActivities<RefundActivities>({
  startToCloseTimeout: '15m',
  heartbeatTimeout: '60s',
  retry: { maximumAttempts: 3 },
});

export async function sweepWorkflow(options: SweepOptions = {}): Promise<SweepReport & { occurrenceId: string }> {
  refuseUndecodable(options);
  const maxRuns = wholeNumber('maxRuns', options?.maxRuns ?? 200, 1, 1000);
  const waitMs = wholeNumber('waitMs', options?.waitMs ?? 120_000, 0, 600_000);
  const occurrence = currentOccurrence();
  const report = await sweepUnknown({ occurrenceId: occurrence.id, maxRuns, waitMs });
  return { occurrenceId: occurrence.id, ...report };
}
