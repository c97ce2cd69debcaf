// A run's budgets, kept in workflow state: its deadline, attempts per step, time spent retrying and polling, and
// requests sent to providers. Nothing starts that the budget cannot pay for.
import type { ActivityOptions } from '@temporalio/workflow';
import type { BudgetView } from '../../contract';
import { temporalRetryPolicy, type BudgetLimits, type RecoveryPolicy } from '../../reliability/policy';
import type { Boundary } from '../../reliability/taxonomy';
import { activityOptions } from './activity-options';

/** A retry policy as the recovery policy derives it. */
type RetryRules = ReturnType<typeof temporalRetryPolicy>;

/** What one activity call asks of the budget. */
export interface CallCost {
  /** A compensation, or recording a refund that happened: held only to the deadline. */
  essential?: boolean;
  /** Provider requests one attempt may send (the completion gate: a list, and a retrieve). */
  requestsPerAttempt?: number;
  /** Provider requests the run will have sent before the call starts (a send whose activity makes its first read). */
  after?: number;
  /** Attempts of the step already made elsewhere (that first read): off its allowance, but one. */
  attemptsMade?: number;
}

/** Thrown when the run cannot afford its next move. */
export class BudgetExhausted extends Error {}

export class RunBudget {
  private providerCalls = 0;
  /** Retry policies derived from the run's policy, by boundary and attempts. */
  private retries: { policy?: RecoveryPolicy; derived: Map<string, RetryRules> } = { derived: new Map() };
  private retryTimeMs = 0;
  deadlineMs: number;

  constructor(
    private limits: BudgetLimits,
    private readonly startedAtMs: number,
  ) {
    this.deadlineMs = startedAtMs + limits.deadlineMs;
  }

  /** The worker's policy replaces the default once the run knows it, its deadline counted from the run's start. */
  adopt(limits: BudgetLimits): void {
    this.limits = limits;
    this.deadlineMs = this.startedAtMs + limits.deadlineMs;
  }

  /** A person's decision gives the run a fresh allowance from now: one parked overnight would meet its deadline at once. */
  renew(nowMs: number): void {
    this.deadlineMs = nowMs + this.limits.deadlineMs;
    this.providerCalls = 0;
    this.retryTimeMs = 0;
  }

  /** While the run awaits the provider, its deadline is at least the wait's own (the policy's awaitProvider). */
  holdUntil(ms: number): void {
    this.deadlineMs = Math.max(this.deadlineMs, ms);
  }

  remainingMs(): number {
    return this.deadlineMs - Date.now();
  }

  spend(use: { transportRequests?: number; retryTimeMs?: number; provider: boolean }): void {
    if (use.provider) this.providerCalls += use.transportRequests ?? 0;
    this.retryTimeMs += Math.max(0, use.retryTimeMs ?? 0);
  }

  /** Why the run may not spend more (on a call to a provider, when `provider`), or undefined while it may. */
  exhausted(provider = true, spent = this.providerCalls): string | undefined {
    if (this.remainingMs() <= 0) return `the run's deadline ${new Date(this.deadlineMs).toISOString()} has passed`;
    if (this.retryTimeMs >= this.limits.retryTimeMs)
      return `${this.retryTimeMs} ms spent retrying and reconciling, of ${this.limits.retryTimeMs} allowed`;
    if (provider && spent >= this.limits.providerCalls)
      return `${spent} provider requests sent, of ${this.limits.providerCalls} allowed`;
    return undefined;
  }

  /** How long the run may still wait (between reconciliation lookups, for a pending refund). */
  waitableMs(): number {
    return Math.max(0, Math.min(this.remainingMs(), this.limits.retryTimeMs - this.retryTimeMs));
  }

  /**
   * Options for one activity at `boundary`, cut to what is left of the run. An `essential` call (a compensation,
   * recording a refund that happened) is held only to the deadline: the run may always repair what it did.
   */
  options(policy: RecoveryPolicy, boundary: Boundary, cost: CallCost = {}): ActivityOptions {
    const { essential = false, requestsPerAttempt = 1, after = 0, attemptsMade = 0 } = cost;
    const provider = boundary !== 'store';
    const spent = this.providerCalls + after;
    const deadlinePassed = () => (this.remainingMs() <= 0 ? this.exhausted(false) : undefined);
    const why = essential ? deadlinePassed() : this.exhausted(provider, spent);
    if (why) throw new BudgetExhausted(why);
    const t = policy.timeouts[boundary];
    const remaining = this.remainingMs();
    if (remaining < t.startToCloseMs) {
      throw new BudgetExhausted(
        `${remaining} ms left before the run's deadline, less than one ${boundary} attempt may take (${t.startToCloseMs} ms)`,
      );
    }
    // An attempt that may send several requests (the completion gate: a list, and a retrieve) gets fewer attempts.
    const left = this.limits.providerCalls - spent;
    const callsLeft = provider && !essential ? Math.floor(left / requestsPerAttempt) : Infinity;
    if (callsLeft < 1)
      throw new BudgetExhausted(
        `${spent} provider requests sent, of ${this.limits.providerCalls} allowed: too few left for one attempt of ${requestsPerAttempt}`,
      );
    const maxAttempts = Math.min(Math.max(1, this.limits.maxStepAttempts - attemptsMade), callsLeft);
    return activityOptions(
      policy,
      boundary,
      { remainingMs: remaining, maxAttempts },
      this.retry(policy, boundary, maxAttempts),
    );
  }

  /** The policy's retry policy at a boundary for so many attempts, derived once a run for each (pure: from the policy alone). */
  private retry(policy: RecoveryPolicy, boundary: Boundary, maxAttempts: number) {
    if (this.retries.policy !== policy) this.retries = { policy, derived: new Map() };
    const key = `${boundary}:${maxAttempts}`;
    const known = this.retries.derived.get(key) ?? temporalRetryPolicy(policy, boundary, maxAttempts);
    this.retries.derived.set(key, known);
    return known;
  }

  view(): BudgetView {
    return {
      deadline: new Date(this.deadlineMs).toISOString(),
      remainingMs: Math.max(0, this.remainingMs()),
      maxStepAttempts: this.limits.maxStepAttempts,
      retryTimeUsedMs: this.retryTimeMs,
      retryTimeLimitMs: this.limits.retryTimeMs,
      providerCallsUsed: this.providerCalls,
      providerCallLimit: this.limits.providerCalls,
    };
  }
}
