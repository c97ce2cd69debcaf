// The recovery policy's terms: its actions and who owns each, the decisions a parked run takes and
// the roles that may take them, the defaults of its optional sections, and how a failure finds its
// rule. The policy (policy.ts), its schema (policy-schema.ts) and workflow code use them. Pure.
import { z } from 'zod';
import type { Boundary, Certainty, FailureCode } from './taxonomy';

export const ACTIONS = [
  'retry',
  'reconcile',
  'repair',
  'compensate',
  'forward_repair',
  'quarantine',
  'ask_human',
  'stop',
] as const;
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
export const DECISION_KINDS = [
  'retry-step',
  'compensate',
  'abandon',
  'approve',
  'reject',
  'reconcile',
  'confirm-delivered',
] as const;
export type DecisionKind = (typeof DECISION_KINDS)[number];
export const ROLES = ['operator', 'approver'] as const;
export type Role = (typeof ROLES)[number];

export const deciderNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9._@-]{1,64}$/, 'must be 1-64 letters, digits, ".", "_", "@" or "-"');

/** A decider's Ed25519 public key: its 32 bytes in lowercase hex, as `npm run decide -- keygen` prints it. */
export const publicKeySchema = z
  .string()
  .regex(/^[0-9a-f]{64}$/, 'must be an Ed25519 public key: 64 lowercase hex digits');

/** Stripe settles most refunds in minutes, some payment methods in days: three days, polled hourly at most. */
export const DEFAULT_AWAIT_PROVIDER = {
  deadlineMs: 3 * 86_400_000,
  poll: { initialMs: 60_000, coefficient: 2, maxMs: 3600_000 },
  jitter: 0.2,
};

export const DEFAULT_BREAKER = {
  enabled: true,
  failureThreshold: 5,
  windowMs: 60_000,
  cooldownMs: 15_000,
  halfOpenProbes: 1,
};

/** The most specific rule for a failure, if any (RecoveryRule, or a rule of a policy file being checked). */
export function findRule<R extends { code: string; certainty: string; boundary: string }>(
  rules: readonly R[],
  code: FailureCode,
  certainty: Certainty,
  boundary: Boundary,
): R | undefined {
  let best: R | undefined;
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
