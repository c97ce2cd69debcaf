// The recovery policy: one declarative table, code × certainty (× boundary) → the next safe move,
// plus the activity timeouts and the run's budgets. The activities' Temporal retry policies are
// derived from it. Workflow code imports this module, so it stays pure and builds no schema: what a
// policy file must be is policy-schema.ts, checked where a policy is loaded, not in every run.
import type { RecoveryPolicy, RecoveryRule } from './policy-schema';
import { findRule } from './policy-terms';
import { CERTAINTIES, FAILURE_CODES, type Boundary, type Certainty, type FailureCode } from './taxonomy';

export type { BreakerSettings, BudgetLimits, DecisionPolicy, RecoveryPolicy } from './policy-schema';

/** The rule that decides a failure. A validated policy always has one. */
export function ruleFor(policy: RecoveryPolicy, code: FailureCode, certainty: Certainty, boundary: Boundary) {
  const rule = findRule(policy.rules, code, certainty, boundary);
  if (!rule) throw new Error(`recovery policy ${policy.version} has no rule for ${code} / ${certainty} at ${boundary}`);
  return rule;
}

const DEFAULT_BACKOFF = { initialMs: 1000, coefficient: 2, maxMs: 60_000 };

export const retries = (rule: RecoveryRule) => rule.action === 'retry' || rule.action === 'repair';

/** Whether the policy resends an email whose hand-over is unknown (accepting that the customer may get it twice). */
export const resendsUnknownEmail = (policy: RecoveryPolicy) =>
  retries(ruleFor(policy, 'UNKNOWN_OUTCOME', 'may_have_executed', 'smtp'));

/** The delay before attempt `attempt + 1` under the rule's backoff, without jitter. */
export function backoffDelay(rule: Pick<RecoveryRule, 'backoff'>, attempt: number): number {
  const b = rule.backoff ?? DEFAULT_BACKOFF;
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
export function temporalRetryPolicy(
  policy: RecoveryPolicy,
  boundary: Boundary,
  maxAttempts = policy.budget.maxStepAttempts,
) {
  const atBoundary = (code: FailureCode) => CERTAINTIES.map((c) => ruleFor(policy, code, c, boundary));
  const nonRetryableErrorTypes = FAILURE_CODES.filter((code) => !atBoundary(code).some(retries));
  const retryRules = FAILURE_CODES.flatMap(atBoundary).filter(retries);
  const attempts = Math.min(maxAttempts, Math.max(1, ...retryRules.map((r) => r.maxAttempts)));
  const backoff = ruleFor(policy, 'TRANSIENT_DEPENDENCY', 'not_executed', boundary).backoff ?? DEFAULT_BACKOFF;
  return {
    initialInterval: backoff.initialMs,
    backoffCoefficient: backoff.coefficient,
    maximumInterval: backoff.maxMs,
    maximumAttempts: attempts,
    nonRetryableErrorTypes,
  };
}
