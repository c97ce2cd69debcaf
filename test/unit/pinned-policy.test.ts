// The policy a run's history pins: the changes from the shipped default, resolved by the workflow to
// exactly the policy the worker loaded, and every shipped policy kept resolvable by later builds.
import { createHash } from 'node:crypto';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { DEFAULT_POLICY_SHA256, pinPolicy, pinnedPolicy } from '../../src/reliability/pinned-policy';
import { parsePolicy } from '../../src/reliability/policy-schema';
import type { RecoveryPolicy } from '../../src/reliability/policy';

const roundTrip = (policy: RecoveryPolicy) => pinnedPolicy(JSON.parse(JSON.stringify(pinPolicy(policy))));

it('names the shipped default by the hash of its JSON, and keeps the 1.0 default resolvable', () => {
  expect(DEFAULT_POLICY_SHA256).toBe(createHash('sha256').update(JSON.stringify(DEFAULT_POLICY)).digest('hex'));
  // Runs pinned to the 1.0 default are replayed by every later build: changing default-policy.json means keeping
  // this one in the bundle under this hash (src/reliability/pinned-policy.ts).
  expect(
    pinnedPolicy({
      policyBase: 'e0296266268d53c80f96cf8b0e45e18f278c3e4fc3e055e3202aa5c0f4a376b8',
      policyChanges: {},
    }),
  ).toBe(DEFAULT_POLICY);
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
});
