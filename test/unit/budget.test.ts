// The run's budgets: what they allow, and the activity options cut to what is left of them.
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { BudgetExhausted, RunBudget } from '../../src/saga/workflow/budget';

const limits = { deadlineMs: 60_000, maxStepAttempts: 4, retryTimeMs: 10_000, providerCalls: 3 };

it('fits every activity inside what is left of the run, and its attempts inside the provider calls left', () => {
  const budget = new RunBudget(limits, Date.now());
  const stripe = budget.options(DEFAULT_POLICY, 'stripe');
  expect(stripe.startToCloseTimeout).toBe(15_000);
  expect(Number(stripe.scheduleToCloseTimeout)).toBeLessThanOrEqual(60_000);
  expect(stripe.retry?.maximumAttempts).toBe(3);
  budget.spend({ provider: true, transportRequests: 2 });
  expect(budget.options(DEFAULT_POLICY, 'stripe').retry?.maximumAttempts).toBe(1);
  // The store is no provider: its attempts are capped by the step limit only.
  expect(budget.options(DEFAULT_POLICY, 'store').retry?.maximumAttempts).toBe(4);
});

it('gives a call that sends several requests per attempt only the attempts the provider calls left can pay for', () => {
  const budget = new RunBudget(limits, Date.now());
  // 3 calls left: one gate attempt (a retrieve and a list) fits, a second would send the 4th request.
  expect(budget.options(DEFAULT_POLICY, 'stripe', { requestsPerAttempt: 2 }).retry?.maximumAttempts).toBe(1);
  budget.spend({ provider: true, transportRequests: 2 });
  expect(() => budget.options(DEFAULT_POLICY, 'stripe', { requestsPerAttempt: 2 })).toThrow(
    /too few left for one attempt of 2/,
  );
  // A compensation or a reconciliation that must happen is never stopped by the call budget.
  expect(
    budget.options(DEFAULT_POLICY, 'stripe', { essential: true, requestsPerAttempt: 2 }).retry?.maximumAttempts,
  ).toBe(4);
});

it('refuses a provider call once the provider calls are spent, but not a store write', () => {
  const budget = new RunBudget(limits, Date.now());
  budget.spend({ provider: true, transportRequests: 3 });
  expect(() => budget.options(DEFAULT_POLICY, 'smtp')).toThrow(
    new BudgetExhausted('3 provider requests sent, of 3 allowed'),
  );
  expect(() => budget.options(DEFAULT_POLICY, 'store')).not.toThrow();
});

it('refuses anything once retry time is spent or the deadline is near', () => {
  const spent = new RunBudget(limits, Date.now());
  spent.spend({ provider: false, retryTimeMs: 10_000 });
  expect(() => spent.options(DEFAULT_POLICY, 'store')).toThrow(
    /10000 ms spent retrying and reconciling, of 10000 allowed/,
  );
  const late = new RunBudget(limits, Date.now() - 50_000);
  expect(() => late.options(DEFAULT_POLICY, 'stripe')).toThrow(/less than one stripe attempt may take \(15000 ms\)/);
  const over = new RunBudget(limits, Date.now() - 61_000);
  expect(over.exhausted()).toMatch(/deadline .* has passed/);
});

it("takes the worker's policy when it arrives, its deadline counted from the run's start, and reports what is used", () => {
  const started = Date.now() - 5000;
  const budget = new RunBudget(limits, started);
  budget.adopt({ ...limits, deadlineMs: 3600_000, providerCalls: 10 });
  expect(budget.deadlineMs).toBe(started + 3600_000);
  budget.spend({ provider: true, transportRequests: 4, retryTimeMs: 1500 });
  expect(budget.view()).toMatchObject({
    providerCallsUsed: 4,
    providerCallLimit: 10,
    retryTimeUsedMs: 1500,
    retryTimeLimitMs: 10_000,
    maxStepAttempts: 4,
  });
  expect(budget.waitableMs()).toBeLessThanOrEqual(8500);
});
