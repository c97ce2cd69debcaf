// Shared by the activity tests: a MockActivityEnvironment and a way to capture the failure an activity throws.
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';

export interface ActivityEnv {
  env: MockActivityEnvironment;
  /** Runs an activity in `env`; unlike MockActivityEnvironment.run, it infers the result type from the function. */
  run<A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R>;
}

export function activityEnv(): ActivityEnv {
  // The tests expect failures; keep the SDK's "Activity failed" warnings out of the test output.
  const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
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
