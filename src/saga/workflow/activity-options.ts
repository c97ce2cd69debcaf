// How the workflows schedule an activity: the policy's timeouts and derived retry policy at its
// boundary, cut to what a run's budget leaves when it has one; bookkeeping outside any budget.
import type { ActivityOptions } from '@temporalio/workflow';
import { temporalRetryPolicy, type RecoveryPolicy } from '../../reliability/policy';
import type { Boundary } from '../../reliability/taxonomy';

/** The audit entries a run leaves, and the reads that go with them: bookkeeping, outside the run's budgets. */
export const BOOKKEEPING = { startToCloseTimeout: '10s', retry: { maximumAttempts: 3 } } as const;
/** Bookkeeping a run must not lose (what stands, the hand-over to the follow-up): tried longer. */
export const PERSISTENT_BOOKKEEPING = { ...BOOKKEEPING, retry: { maximumAttempts: 10 } } as const;

/**
 * Options for one activity at `boundary`; `within` cuts its schedule-to-close and attempts to a run's budget. `retry`:
 * the policy's retry policy for those attempts, when the caller keeps it (derived from every rule: not cheap).
 */
export function activityOptions(
  policy: RecoveryPolicy,
  boundary: Boundary,
  within?: { remainingMs: number; maxAttempts: number },
  retry = temporalRetryPolicy(policy, boundary, within?.maxAttempts),
): ActivityOptions {
  const t = policy.timeouts[boundary];
  return {
    startToCloseTimeout: t.startToCloseMs,
    scheduleToCloseTimeout: within ? Math.min(t.scheduleToCloseMs, within.remainingMs) : t.scheduleToCloseMs,
    retry,
  };
}
