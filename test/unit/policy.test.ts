// The recovery policy: the default table row by row, its validation, and what is derived from it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import policyJson from '../../src/reliability/default-policy.json';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { backoffDelay, ruleFor, temporalRetryPolicy, withJitter } from '../../src/reliability/policy';
import { parsePolicy } from '../../src/reliability/policy-schema';
import { checkWrittenOut, loadPolicy } from '../../src/reliability/policy-file';
import { BOUNDARIES, CERTAINTIES, FAILURE_CODES } from '../../src/reliability/taxonomy';

// code, certainty, boundary → the action and owner the shipped policy prescribes.
const table: [string, string, string, string, string, number][] = [
  ['RATE_LIMIT', 'not_executed', 'stripe', 'retry', 'dependency_adapter', 5],
  ['RATE_LIMIT', 'not_executed', 'smtp', 'retry', 'dependency_adapter', 5],
  ['TRANSIENT_DEPENDENCY', 'not_executed', 'stripe', 'retry', 'dependency_adapter', 5],
  ['TRANSIENT_DEPENDENCY', 'may_have_executed', 'stripe', 'retry', 'dependency_adapter', 5],
  ['INVALID_ARGUMENTS', 'not_executed', 'stripe', 'stop', 'workflow', 1],
  ['PERMISSION_DENIED', 'not_executed', 'stripe', 'stop', 'operator', 1],
  ['PERMANENT_BUSINESS', 'not_executed', 'store', 'stop', 'workflow', 1],
  ['STATE_CONFLICT', 'not_executed', 'store', 'repair', 'dependency_adapter', 5],
  ['STATE_CONFLICT', 'may_have_executed', 'stripe', 'retry', 'dependency_adapter', 5],
  ['UNKNOWN_OUTCOME', 'may_have_executed', 'stripe', 'reconcile', 'workflow', 8],
  ['UNKNOWN_OUTCOME', 'undeterminable', 'stripe', 'reconcile', 'workflow', 8],
  ['UNKNOWN_OUTCOME', 'may_have_executed', 'smtp', 'ask_human', 'operator', 1],
  ['UNKNOWN_OUTCOME', 'may_have_executed', 'store', 'ask_human', 'operator', 1],
  ['PARTIAL_OUTCOME', 'partial', 'stripe', 'ask_human', 'operator', 1],
  ['CAPACITY', 'not_executed', 'store', 'retry', 'dependency_adapter', 5],
  ['BUDGET_EXCEEDED', 'not_executed', 'stripe', 'stop', 'operator', 1],
  ['POISON', 'undeterminable', 'stripe', 'quarantine', 'operator', 1],
];

it.each(table)('%s / %s at %s → %s by %s', (code, certainty, boundary, action, owner, maxAttempts) => {
  const rule = ruleFor(DEFAULT_POLICY, code as never, certainty as never, boundary as never);
  expect(rule).toMatchObject({ action, owner, maxAttempts });
});

it('covers every rule of the shipped policy in the table above', () => {
  const used = new Set(
    table.map(([code, certainty, boundary]) =>
      ruleFor(DEFAULT_POLICY, code as never, certainty as never, boundary as never),
    ),
  );
  expect(DEFAULT_POLICY.rules.filter((r) => !used.has(r))).toEqual([]);
});

it('decides every code × certainty × boundary', () => {
  for (const code of FAILURE_CODES)
    for (const c of CERTAINTIES) for (const b of BOUNDARIES) expect(ruleFor(DEFAULT_POLICY, code, c, b)).toBeDefined();
});

describe('validation', () => {
  const base = policyJson as unknown as Record<string, unknown> & { rules: Record<string, unknown>[] };
  const withRules = (rules: unknown[]) => ({ ...base, rules });

  it.each([
    ['a code with no rule', withRules(base.rules.filter((r) => r.code !== 'POISON')), /no rule decides POISON/],
    [
      'a retry owned by a person',
      withRules([...base.rules.slice(1), { ...base.rules[0], owner: 'operator' }]),
      /retry is owned by dependency_adapter/,
    ],
    [
      'a retry without backoff',
      withRules([...base.rules.slice(1), { code: 'RATE_LIMIT', action: 'retry', owner: 'dependency_adapter' }]),
      /needs a backoff/,
    ],
    ['two rules for one case', withRules([...base.rules, base.rules[0]]), /a second rule for RATE_LIMIT/],
    ['an unknown action', withRules([...base.rules.slice(1), { ...base.rules[0], action: 'pray' }]), /action/],
    ['an unknown field', { ...base, extra: 1 }, /extra/],
    [
      'timeouts that do not nest',
      { ...base, timeouts: { ...(base.timeouts as object), store: { startToCloseMs: 5000, scheduleToCloseMs: 1000 } } },
      /scheduleToCloseMs must be at least/,
    ],
    ['no budget', { ...base, budget: undefined }, /budget/],
  ])('refuses %s, naming the problem', (_label, input, message) => {
    expect(() => parsePolicy(input)).toThrow(message);
  });

  it('loads a policy file, and names the file when it is wrong', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'policy-'));
    const good = path.join(dir, 'good.json');
    fs.writeFileSync(good, JSON.stringify({ ...base, version: 'ops-2' }));
    expect(loadPolicy(good).version).toBe('ops-2');
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, '{ not json');
    expect(() => loadPolicy(bad)).toThrow(/bad\.json is not valid JSON/);
    fs.writeFileSync(bad, JSON.stringify(withRules([])));
    expect(() => loadPolicy(bad)).toThrow(/invalid recovery policy .*bad\.json: rules/);
    expect(() => loadPolicy(path.join(dir, 'missing.json'))).toThrow(/cannot read the recovery policy/);
    expect(loadPolicy(undefined)).toBe(DEFAULT_POLICY);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('ships a default policy that is complete as written: workflow code uses it without parsing it', () => {
    expect(parsePolicy(policyJson)).toEqual(policyJson);
    expect(DEFAULT_POLICY).toBe(policyJson);
    // A rule that leaves a field to its default would reach workflow code without it.
    // Every worker checks it at start; one that leaves a field to its default is refused.
    expect(() => checkWrittenOut(DEFAULT_POLICY, 'default policy')).not.toThrow();
    const incomplete = Object.fromEntries(Object.entries(policyJson.rules[0]).filter(([key]) => key !== 'certainty'));
    expect(() => checkWrittenOut(withRules([incomplete, ...base.rules.slice(1)]) as never, 'default policy')).toThrow(
      /default policy leaves fields to their defaults/,
    );
    expect(() => checkWrittenOut(withRules([]) as never, 'default policy')).toThrow(/invalid default policy: rules/);
  });
});

describe('what is derived from the table', () => {
  it("derives each boundary's Temporal retry policy: non-retryable codes, attempts, intervals", () => {
    const stripe = temporalRetryPolicy(DEFAULT_POLICY, 'stripe');
    expect(stripe.nonRetryableErrorTypes.sort()).toEqual(
      [
        'BUDGET_EXCEEDED',
        'INVALID_ARGUMENTS',
        'PARTIAL_OUTCOME',
        'PERMANENT_BUSINESS',
        'PERMISSION_DENIED',
        'POISON',
        'UNKNOWN_OUTCOME',
      ].sort(),
    );
    expect(stripe).toMatchObject({
      maximumAttempts: 5,
      initialInterval: 1000,
      backoffCoefficient: 2,
      maximumInterval: 30000,
    });
    expect(temporalRetryPolicy(DEFAULT_POLICY, 'stripe', 2).maximumAttempts).toBe(2);
    // Changing the table changes the derived policy: nothing is written twice.
    const strict = parsePolicy({
      ...DEFAULT_POLICY,
      rules: DEFAULT_POLICY.rules.map((r) =>
        r.code === 'RATE_LIMIT' ? { ...r, action: 'stop', owner: 'workflow' } : r,
      ),
    });
    expect(temporalRetryPolicy(strict, 'smtp').nonRetryableErrorTypes).toContain('RATE_LIMIT');
  });

  it('backs off exponentially up to the cap, and spreads delays by the jitter', () => {
    const rule = ruleFor(DEFAULT_POLICY, 'RATE_LIMIT', 'not_executed', 'stripe');
    expect([1, 2, 3, 6, 10].map((a) => backoffDelay(rule, a))).toEqual([1000, 2000, 4000, 30000, 30000]);
    expect(withJitter(1000, 0.2, 0)).toBe(800);
    expect(withJitter(1000, 0.2, 0.5)).toBe(1000);
    expect(withJitter(1000, 0.2, 0.9999)).toBe(1200);
    // Retry-After is a floor: jitter may only add to it.
    expect(withJitter(3000, 0.2, 0, 3000)).toBe(3000);
  });
});

describe('awaiting the provider', () => {
  const withoutAwait = Object.fromEntries(Object.entries(policyJson).filter(([key]) => key !== 'awaitProvider'));
  const withAwait = (awaitProvider: unknown) => ({ ...withoutAwait, awaitProvider });

  it('gives a policy written before it existed the default wait: three days, polled hourly at most', () => {
    expect(parsePolicy(withoutAwait).awaitProvider).toEqual({
      deadlineMs: 259_200_000,
      poll: { initialMs: 60_000, coefficient: 2, maxMs: 3_600_000 },
      jitter: 0.2,
    });
    expect(DEFAULT_POLICY.awaitProvider.deadlineMs).toBe(259_200_000);
  });

  it('refuses polls faster than a second, and a deadline that would need more than 200 polls', () => {
    expect(() =>
      parsePolicy(withAwait({ deadlineMs: 60_000, poll: { initialMs: 10, coefficient: 2, maxMs: 1000 } })),
    ).toThrow(/awaitProvider.poll: initialMs must be at least 1000/);
    expect(() =>
      parsePolicy(withAwait({ deadlineMs: 7 * 86_400_000, poll: { initialMs: 1000, coefficient: 2, maxMs: 60_000 } })),
    ).toThrow(/deadlineMs may be at most 200 × poll.maxMs/);
    expect(
      parsePolicy(withAwait({ deadlineMs: 3600_000, poll: { initialMs: 5000, coefficient: 2, maxMs: 60_000 } }))
        .awaitProvider.jitter,
    ).toBe(0.2);
  });
});

describe('the circuit breaker settings', () => {
  const withoutBreaker = Object.fromEntries(Object.entries(policyJson).filter(([key]) => key !== 'breaker'));

  it('gives a policy written before it existed the default breaker', () => {
    expect(parsePolicy(withoutBreaker).breaker).toEqual({
      enabled: true,
      failureThreshold: 5,
      windowMs: 60_000,
      cooldownMs: 15_000,
      halfOpenProbes: 1,
    });
  });

  it('refuses a breaker that could never open or never probe', () => {
    const breaker = { failureThreshold: 5, windowMs: 60_000, cooldownMs: 15_000, halfOpenProbes: 1 };
    expect(() => parsePolicy({ ...withoutBreaker, breaker: { ...breaker, failureThreshold: 0 } })).toThrow(
      /breaker.failureThreshold/,
    );
    expect(() => parsePolicy({ ...withoutBreaker, breaker: { ...breaker, halfOpenProbes: 0 } })).toThrow(
      /breaker.halfOpenProbes/,
    );
    expect(() => parsePolicy({ ...withoutBreaker, breaker: { ...breaker, cooldown: 1 } })).toThrow(/breaker/);
  });
});
