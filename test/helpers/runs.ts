// What every tier's tests share about runs: the test policy (fault paths in seconds), and how to
// wait for a run to end or park and read how.
import type { Client, WorkflowHandle } from '@temporalio/client';
import { outcomeOf } from '../../src/client/outcome';
import { startRefund } from '../../src/client/refunds';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import { stepsQuery, type CompletedRefund, type RefundResult, type RefundRunState } from '../../src/contract';
import type { refundWorkflow } from '../../src/workflows';

/** Small timeouts and windows, so that the fault paths run in seconds. */
export const TEST_POLICY: RecoveryPolicy = {
  ...DEFAULT_POLICY,
  rules: DEFAULT_POLICY.rules.map((r) =>
    r.backoff ? { ...r, backoff: { initialMs: 200, coefficient: 2, maxMs: 2000 } } : r,
  ),
  timeouts: {
    stripe: { startToCloseMs: 5000, scheduleToCloseMs: 60_000 },
    // The least the worker accepts (SMTP_MIN_ATTEMPT_MS): a hand-over whose answer is lost is cut 1 s inside it.
    smtp: { startToCloseMs: 10_000, scheduleToCloseMs: 60_000 },
    store: { startToCloseMs: 5000, scheduleToCloseMs: 30_000 },
  },
  // Off here: a test's faults are counted attempt by attempt, and a breaker opened by an earlier
  // test of the file would change them. The breaker has tests of its own (circuit-breaker.test.ts),
  // and the chaos runs keep it on.
  breaker: { ...DEFAULT_POLICY.breaker, enabled: false },
  // Unsigned decisions, as DECISIONS_UNSIGNED=allow takes them: most cases are about what a decision
  // does. Signatures have their own cases (SIGNED_POLICY: test/workflow/decisions.test.ts, inspect.test.ts).
  decisions: { ...DEFAULT_POLICY.decisions, unsigned: 'allow' },
};

/**
 * How a run that did not complete ended, or where it parked: its status (rejected, compensated,
 * abandoned, stopped; needs_attention or awaiting_approval while it waits for a person) and its
 * state as the workflow reports it. Give it the run's handle; a worker must be polling to answer.
 */
type Started = WorkflowHandle<typeof refundWorkflow> | { handle: WorkflowHandle<typeof refundWorkflow> };
export async function stopped(started: Started | Promise<Started>): Promise<{ status: string; state: RefundRunState }> {
  const given = await started;
  const handle = 'handle' in given ? given.handle : given;
  const outcome = await outcomeOf(handle, 100);
  if (outcome.kind === 'result') expect(outcome.result.status).not.toBe('completed');
  const state = outcome.kind === 'parked' ? outcome.state : await handle.query(stepsQuery);
  return { status: outcome.kind === 'parked' ? state.status : outcome.result.status, state };
}

/** The result of a run that must have completed. */
export function completed(result: RefundResult): CompletedRefund {
  expect(result).toMatchObject({ status: 'completed' });
  return result as CompletedRefund;
}

/** Starts (or attaches to) the refund and returns its result, which must be completed. */
export async function refund(client: Client, input: unknown): Promise<CompletedRefund> {
  const { workflowId, handle } = await startRefund(client, input);
  const outcome = await outcomeOf(handle);
  if (outcome.kind === 'parked') throw new Error(`${workflowId} needs a person: ${outcome.state.outcome?.reason}`);
  return completed(outcome.result);
}

/**
 * A policy as a worker process reads it from RECOVERY_POLICY_FILE: without `unsigned`, which a file may
 * not set (a worker's DECISIONS_UNSIGNED does; the process gets it in UNSIGNED_ENV).
 */
export function policyFileText(policy: RecoveryPolicy): string {
  const decisions = { ...policy.decisions };
  delete decisions.unsigned;
  return JSON.stringify({ ...policy, decisions });
}
/** What a worker process needs to take the unsigned decisions TEST_POLICY's runs are sent. */
export const UNSIGNED_ENV = { DECISIONS_UNSIGNED: 'allow' } as const;

/** TEST_POLICY with lookups that give up sooner, so that the unknown paths end in seconds. */
export function fewLookups(lookups: number): RecoveryPolicy {
  return {
    ...TEST_POLICY,
    rules: TEST_POLICY.rules.map((r) => {
      if (r.code === 'UNKNOWN_OUTCOME' && r.boundary === 'stripe') return { ...r, maxAttempts: lookups };
      if (r.code === 'TRANSIENT_DEPENDENCY') return { ...r, maxAttempts: 2 };
      return r;
    }),
  };
}
