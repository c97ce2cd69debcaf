// Shared by the activity tests: a MockActivityEnvironment and a way to capture the failure an activity throws.
import type { Info } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type { AttemptSummary } from '../../src/reliability/attempt-ledger';
import type { FailureDetails } from '../../src/reliability/taxonomy';

export interface ActivityEnv {
  env: MockActivityEnvironment;
  /** Runs an activity in `env`; unlike MockActivityEnvironment.run, it infers the result type from the function. */
  run<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R>;
}

/** An activity context; `info` sets the attempt, the schedule-to-close budget, the run … */
export function activityEnv(info: Partial<Info> = {}): ActivityEnv {
  // The tests expect failures; keep the SDK's "Activity failed" warnings out of the test output.
  const env = new MockActivityEnvironment(
    {
      scheduledTimestampMs: Date.now(),
      currentAttemptScheduledTimestampMs: Date.now(),
      startToCloseTimeoutMs: 30_000,
      scheduleToCloseTimeoutMs: 60_000,
      ...info,
    },
    { logger: new DefaultLogger('ERROR') },
  );
  return { env, run: (fn, ...args) => env.run(fn, ...args) };
}

/** The ApplicationFailure `promise` rejects with; fails the test if it resolves or rejects with anything else. */
export async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

/** Our details on a failure: the classification and the step's attempt ledger. */
export function detailsOf(failure: ApplicationFailure): FailureDetails & { ledger: AttemptSummary[] } {
  return failure.details?.[0] as FailureDetails & { ledger: AttemptSummary[] };
}
