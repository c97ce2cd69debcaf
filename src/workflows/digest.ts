// The daily digest: one email per occurrence to the operators, listing the refund runs that wait
// for a person, sent through the idempotent notification path under a key built from the
// occurrence id, so a redelivered or re-run occurrence sends no second digest.
import { DEFAULT_POLICY } from '../reliability/default-policy';
import { activityOptions } from '../saga/workflow/activity-options';
import { pooledActivities } from './pools';
import type { RefundActivities } from '../activities';
import { currentOccurrence, refuseUndecodable, wholeNumber } from './occurrence';

export interface DigestOptions {
  /** At most this many runs are listed (0-1000); the digest always says how many wait. */
  max?: number;
}

export interface DigestResult {
  occurrenceId: string;
  key: string;
  waiting: number;
  messageId: string;
  alreadySent: boolean;
}

const { listAttention } = pooledActivities<RefundActivities>({
  startToCloseTimeout: '60s',
  retry: { maximumAttempts: 5 },
});
// The shipped policy's smtp timeouts and retries, as a run's email has them before a worker's policy is pinned: the
// digest has no run of its own to pin one, and a send is cut inside whatever start-to-close its attempt is given.
const { sendDigest } = pooledActivities<RefundActivities>(activityOptions(DEFAULT_POLICY, 'smtp'));

export async function digestWorkflow(options: DigestOptions = {}): Promise<DigestResult> {
  refuseUndecodable(options);
  const max = wholeNumber('max', options?.max ?? 100, 0, 1000);
  const occurrence = currentOccurrence();
  const key = `digest:${occurrence.id}`;
  const { total, runs } = await listAttention({ max });
  const sent = await sendDigest({
    key,
    occurrenceId: occurrence.id,
    label: occurrence.scheduledAt ?? occurrence.id,
    total,
    runs,
  });
  return { occurrenceId: occurrence.id, key, waiting: total, messageId: sent.messageId, alreadySent: sent.alreadySent };
}
