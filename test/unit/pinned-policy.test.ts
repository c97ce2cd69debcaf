// The policy a run's history pins: the changes from the shipped default, resolved by the workflow to
// exactly the policy the worker loaded, and every shipped policy kept resolvable by later builds.
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { beginResultSchema } from '../../src/contract';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { checkShipped } from '../../src/reliability/policy-file';
import { DEFAULT_POLICY_SHA256, SHIPPED_POLICIES, pinPolicy, pinnedPolicy } from '../../src/reliability/pinned-policy';
import { parsePolicy } from '../../src/reliability/policy-schema';
import { TEST_POLICY } from '../helpers/runs';
import type { RecoveryPolicy } from '../../src/reliability/policy';

const roundTrip = (policy: RecoveryPolicy) => pinnedPolicy(JSON.parse(JSON.stringify(pinPolicy(policy))));

const sha256 = (policy: RecoveryPolicy) => createHash('sha256').update(JSON.stringify(policy)).digest('hex');

it('names each shipped policy by the hash of its JSON, keeps the first default resolvable, and a worker checks both', () => {
  expect(DEFAULT_POLICY_SHA256).toBe(sha256(DEFAULT_POLICY));
  for (const [hash, policy] of SHIPPED_POLICIES) expect(sha256(policy)).toBe(hash);
  // Runs pinned to the first pinned default (2026-11-30.2) are replayed by every later build: a changed
  // default-policy.json is listed under its own hash, and this one stays, with this content.
  const first = 'e0296266268d53c80f96cf8b0e45e18f278c3e4fc3e055e3202aa5c0f4a376b8';
  expect(sha256(pinnedPolicy({ policyBase: first, policyChanges: {} }))).toBe(first);
  expect(() => checkShipped()).not.toThrow();
  // default-policy.json edited in place, its old hash kept: every worker refuses to start.
  const edited = new Map([[first, { ...DEFAULT_POLICY, version: 'edited' }]]);
  expect(() => checkShipped(edited)).toThrow(/listed under e0296266.* but hashes to [0-9a-f]{64}: runs pinned to/);
});

it('resolves the policies the tests run under to themselves', () => {
  // TEST_POLICY carries a worker's own addition (decisions.unsigned); a signing one carries keys instead.
  const signed: RecoveryPolicy = {
    ...DEFAULT_POLICY,
    decisions: { ...DEFAULT_POLICY.decisions, keys: { alice: 'b'.repeat(64) } },
  };
  for (const policy of [TEST_POLICY, signed]) expect(isDeepStrictEqual(roundTrip(policy), policy)).toBe(true);
});

it('pins the default as no changes at all', () => {
  expect(pinPolicy(DEFAULT_POLICY)).toEqual({ policyBase: DEFAULT_POLICY_SHA256, policyChanges: {} });
  expect(JSON.stringify(pinPolicy(DEFAULT_POLICY)).length).toBeLessThan(120);
});

it('pins a worker’s own policy as what differs, and resolves it to that policy exactly', () => {
  const own = parsePolicy({
    ...DEFAULT_POLICY,
    version: 'ops-2026-12',
    budget: { ...DEFAULT_POLICY.budget, maxStepAttempts: 5 },
    decisions: { ...DEFAULT_POLICY.decisions, keys: { alice: 'a'.repeat(64) }, needApproval: ['compensate'] },
    rules: [...DEFAULT_POLICY.rules].reverse(),
  });
  const pin = pinPolicy(own);
  expect(pin).toMatchObject({
    policyBase: DEFAULT_POLICY_SHA256,
    policyChanges: {
      version: 'ops-2026-12',
      budget: { maxStepAttempts: 5 },
      decisions: { keys: { alice: 'a'.repeat(64) }, needApproval: ['compensate'] },
    },
  });
  expect(Object.keys((pin as { policyChanges: object }).policyChanges).sort()).toEqual([
    'budget',
    'decisions',
    'rules',
    'version',
  ]);
  expect(roundTrip(own)).toEqual(own);
  // A field the worker's policy leaves out is removed, not inherited from the default.
  const without: Partial<RecoveryPolicy> = { ...DEFAULT_POLICY };
  delete without.awaitProvider;
  expect(roundTrip(without as RecoveryPolicy)).toEqual(without);
  expect('awaitProvider' in roundTrip(without as RecoveryPolicy)).toBe(false);
});

it('keeps whole a policy the changes cannot say (a null), and refuses a base this build does not ship', () => {
  const withNull = { ...DEFAULT_POLICY, breaker: null } as unknown as RecoveryPolicy;
  expect(pinPolicy(withNull)).toEqual({ policy: withNull });
  expect(roundTrip(withNull)).toEqual(withNull);
  expect(() => pinnedPolicy({ policyBase: 'f'.repeat(64), policyChanges: {} })).toThrow(
    /pinned to a recovery policy this build does not ship \(f{64}\)/,
  );
  // A base named like an object's own property is no base either; a change named `__proto__` is a key like any other.
  expect(() => pinnedPolicy({ policyBase: 'toString', policyChanges: {} })).toThrow(/does not ship \(toString\)/);
  const odd = pinnedPolicy(
    JSON.parse(`{"policyBase":"${DEFAULT_POLICY_SHA256}","policyChanges":{"__proto__":{"x":1}}}`),
  );
  expect(Object.getPrototypeOf(odd)).toBe(Object.prototype);
  expect(Object.keys(odd)).toContain('__proto__');
});

it('is read one way only: a result carrying both forms does not fit', () => {
  const settings = beginResultSchema.shape.settings;
  const base = { scope: 's', provider: { dedupeWindowMs: 1 } };
  expect(settings.safeParse({ ...base, ...pinPolicy(TEST_POLICY) }).success).toBe(true);
  expect(settings.safeParse({ ...base, policy: TEST_POLICY }).success).toBe(true);
  expect(settings.safeParse({ ...base, policy: TEST_POLICY, ...pinPolicy(DEFAULT_POLICY) }).success).toBe(false);
  expect(settings.safeParse({ ...base, policyBase: DEFAULT_POLICY_SHA256 }).success).toBe(false);
});
