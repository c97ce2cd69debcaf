// The recovery policy: one declarative table, code × certainty (× boundary) → the next safe move,
// plus the activity timeouts and the run's budgets. The activities' Temporal retry policies are
// derived from it. Workflow code imports this module, so it stays pure and builds one small schema:
// what a policy file must be is policy-schema.ts, checked where a policy is loaded, not in every run.
import { z } from 'zod';
import type { AwaitProvider, BreakerSettings, RecoveryPolicy, RecoveryRule } from './policy-schema';
import { CERTAINTIES, FAILURE_CODES, type Boundary, type Certainty, type FailureCode } from './taxonomy';

export type { ActivityTimeouts, AwaitProvider, BreakerSettings, DecisionPolicy, RecoveryPolicy, RecoveryRule, RunBudget } from './policy-schema';

export const ACTIONS = ['retry', 'reconcile', 'repair', 'compensate', 'forward_repair', 'quarantine', 'ask_human', 'stop'] as const;
export type RecoveryAction = (typeof ACTIONS)[number];

/** Who carries out the action: the activity's own Temporal retry policy, the workflow, or a person. */
export const OWNERS = ['dependency_adapter', 'workflow', 'operator'] as const;
export type RecoveryOwner = (typeof OWNERS)[number];

export const OWNER_OF: Record<RecoveryAction, RecoveryOwner[]> = {
  retry: ['dependency_adapter'],
  repair: ['dependency_adapter'],
  reconcile: ['workflow'],
  compensate: ['workflow'],
  forward_repair: ['workflow', 'operator'],
  quarantine: ['operator'],
  ask_human: ['operator'],
  stop: ['workflow', 'operator'],
};

/** What a parked run's decisions may be: retry-step (of the step that failed), compensate, abandon; approve or reject one that waits for approval. */
/** `reconcile` only looks the refund up and sends nothing: anyone may ask for it (the scheduled sweep does). */
/** `confirm-delivered` records a person's word that a notice whose hand-over is unknown was delivered: the run completes on it. */
export const DECISION_KINDS = ['retry-step', 'compensate', 'abandon', 'approve', 'reject', 'reconcile', 'confirm-delivered'] as const;
export type DecisionKind = (typeof DECISION_KINDS)[number];
export const ROLES = ['operator', 'approver'] as const;
export type Role = (typeof ROLES)[number];

export const deciderNameSchema = z.string().regex(/^[A-Za-z0-9._@-]{1,64}$/, 'must be 1-64 letters, digits, ".", "_", "@" or "-"');

/** Stripe settles most refunds in minutes, some payment methods in days: three days, polled hourly at most. */
export const DEFAULT_AWAIT_PROVIDER: AwaitProvider = { deadlineMs: 3 * 86_400_000, poll: { initialMs: 60_000, coefficient: 2, maxMs: 3600_000 }, jitter: 0.2 };

export const DEFAULT_BREAKER: BreakerSettings = { enabled: true, failureThreshold: 5, windowMs: 60_000, cooldownMs: 15_000, halfOpenProbes: 1 };

export function findRule(rules: readonly RecoveryRule[], code: FailureCode, certainty: Certainty, boundary: Boundary): RecoveryRule | undefined {
  let best: RecoveryRule | undefined;
  let bestScore = -1;
  for (const rule of rules) {
    if (rule.code !== code) continue;
    if (rule.certainty !== '*' && rule.certainty !== certainty) continue;
    if (rule.boundary !== '*' && rule.boundary !== boundary) continue;
    // The most specific rule wins: an exact certainty outranks an exact boundary.
    const score = (rule.certainty === '*' ? 0 : 2) + (rule.boundary === '*' ? 0 : 1);
    if (score > bestScore) [best, bestScore] = [rule, score];
  }
  return best;
}

/** The rule that decides a failure. A validated policy always has one. */
export function decide(policy: RecoveryPolicy, code: FailureCode, certainty: Certainty, boundary: Boundary): RecoveryRule {
  const rule = findRule(policy.rules, code, certainty, boundary);
  if (!rule) throw new Error(`recovery policy ${policy.version} has no rule for ${code} / ${certainty} at ${boundary}`);
  return rule;
}

export const retries = (rule: RecoveryRule) => rule.action === 'retry' || rule.action === 'repair';

/** Whether the policy resends an email whose hand-over is unknown (accepting that the customer may get it twice). */
export const resendsUnknownEmail = (policy: RecoveryPolicy) => retries(decide(policy, 'UNKNOWN_OUTCOME', 'may_have_executed', 'smtp'));

/** The delay before attempt `attempt + 1` under the rule's backoff, without jitter. */
export function backoffDelay(rule: Pick<RecoveryRule, 'backoff'>, attempt: number): number {
  const b = rule.backoff ?? { initialMs: 1000, coefficient: 2, maxMs: 60_000 };
  return Math.min(b.maxMs, Math.round(b.initialMs * b.coefficient ** Math.max(0, attempt - 1)));
}

/** Spreads a delay by ± the rule's jitter; `random` is in [0, 1). Never less than `floor` (e.g. Retry-After). */
export function withJitter(delayMs: number, jitter: number, random: number, floorMs = 0): number {
  return Math.max(floorMs, Math.round(delayMs * (1 + jitter * (2 * random - 1))));
}

/**
 * The Temporal retry policy of one boundary's activities, derived from the table: the codes no rule
 * retries there are non-retryable, the attempts are the largest any retry rule allows (capped by the
 * budget), and the intervals are those of a transient failure, used only when a failure carries no
 * nextRetryDelay of its own (a timeout, a worker that died).
 */
export function temporalRetryPolicy(policy: RecoveryPolicy, boundary: Boundary, maxAttempts = policy.budget.maxStepAttempts) {
  const atBoundary = (code: FailureCode) => CERTAINTIES.map((c) => decide(policy, code, c, boundary));
  const nonRetryableErrorTypes = FAILURE_CODES.filter((code) => !atBoundary(code).some(retries));
  const retryRules = FAILURE_CODES.flatMap(atBoundary).filter(retries);
  const attempts = Math.min(maxAttempts, Math.max(1, ...retryRules.map((r) => r.maxAttempts)));
  const transient = decide(policy, 'TRANSIENT_DEPENDENCY', 'not_executed', boundary);
  const backoff = transient.backoff ?? { initialMs: 1000, coefficient: 2, maxMs: 60_000 };
  return {
    initialInterval: backoff.initialMs,
    backoffCoefficient: backoff.coefficient,
    maximumInterval: backoff.maxMs,
    maximumAttempts: attempts,
    nonRetryableErrorTypes,
  };
}
