// The reconciliation sweep: asks the parked runs whose refund is unknown to look again (lookups
// only, nothing is sent), up to `maxRuns` per occurrence, and reports what settled. What stays
// unknown stays parked for a person; the next occurrence takes the runs this one did not reach.
import { ApplicationFailure } from '@temporalio/workflow';
import { pooledActivities } from './pools';
import type { RefundActivities } from '../activities';
import type { SweepReport } from '../activities/sweep';
import { currentOccurrence } from './occurrence';
import { isUndecodable } from '../codec/payload-converter';
import { refusePlaintext } from '../saga/workflow/messages';

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
  refusePlaintext(options);
  // Defaults are no answer to options nobody could decode (payload-converter.ts); an older history never holds such input.
  if (isUndecodable(options))
    throw ApplicationFailure.nonRetryable(
      `its options could not be decoded: ${options.$undecodable}`,
      'INVALID_ARGUMENTS',
    );
  const maxRuns = Math.trunc(Number(options?.maxRuns ?? 200));
  const waitMs = Math.trunc(Number(options?.waitMs ?? 120_000));
  if (!(maxRuns >= 1 && maxRuns <= 1000))
    throw ApplicationFailure.nonRetryable(
      `maxRuns must be a whole number from 1 to 1000, got ${JSON.stringify(options?.maxRuns)}`,
    );
  if (!(waitMs >= 0 && waitMs <= 600_000))
    throw ApplicationFailure.nonRetryable(`waitMs must be 0-600000, got ${JSON.stringify(options?.waitMs)}`);
  const occurrence = currentOccurrence();
  const report = await sweepUnknown({ occurrenceId: occurrence.id, maxRuns, waitMs });
  return { occurrenceId: occurrence.id, ...report };
}
