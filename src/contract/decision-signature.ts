// What a decider signs: the decision, the run and the parking it answers, an expiry and a nonce, as
// one canonical string. `npm run decide` signs it with the decider's Ed25519 key (node:crypto); the
// run's validator verifies it in workflow code. docs/production.md, "Signed decisions".
import { z } from 'zod';
import type { DecisionKind } from '../reliability/policy-terms';
import { sha256Hex } from './sha256';
import type { SagaStep } from './steps';

/** The longest a signature may be valid for: time enough to paste it into a `temporal` call, short enough that one left lying around lapses. */
export const MAX_SIGNATURE_TTL_MS = 24 * 3600_000;
/** What the longest validity may exceed by: the signer's clock may run a little ahead of Temporal's. */
export const SIGNATURE_CLOCK_SKEW_MS = 5 * 60_000;

// Patterns of our own, not zod's formats: workflow code parses this (src/workflows/preload.ts).
export const signedSchema = z
  .object({
    /** The run it is addressed to. */
    workflowId: z.string().min(1).max(255),
    /** The parking it answers: decisionAddress of the run's state when it was signed. */
    answers: z.string().min(1).max(200),
    expiresAt: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/, 'must be an ISO instant in UTC')
      // An impossible date (month 13) parses to NaN, which no comparison with the clock would refuse.
      .refine((v) => Number.isFinite(Date.parse(v)), 'must be a real date'),
    nonce: z.string().regex(/^[0-9a-f]{32}$/, 'must be 32 lowercase hex digits'),
    signature: z.string().regex(/^[0-9a-f]{128}$/, 'must be an Ed25519 signature: 128 lowercase hex digits'),
  })
  .strict();
export type Signed = z.infer<typeof signedSchema>;

/** The decision's fields a signature covers (the reason as the validator reads it: trimmed). */
export interface SignedFields {
  decision: DecisionKind;
  by: string;
  reason: string;
  step?: SagaStep;
}

/** The exact text signed: an array, so that no field's order or absence is ambiguous. */
export function decisionStatement(d: SignedFields, s: Omit<Signed, 'signature'>): string {
  const { workflowId, answers, expiresAt, nonce } = s;
  return JSON.stringify([
    'durable-refunds/decision/v1',
    workflowId,
    answers,
    d.decision,
    d.step ?? null,
    d.by,
    d.reason.trim(),
    expiresAt,
    nonce,
  ]);
}

/**
 * The parking a decision answers: the run (a reset starts another, with the same parkings replayed), when it
 * parked and how many decisions it has taken, so a signature is good for one decision on one parking of one run
 * (an approval, for the proposal just taken).
 */
export function decisionAddress(state: {
  runId: string;
  parked: { since: string } | null;
  decisions: readonly unknown[];
}): string {
  return `run-${state.runId}:parked-${state.parked?.since ?? 'not-parked'}:after-${state.decisions.length}`;
}

/** An address as decisionAddress makes it, for reading one a person gives (`decide --answers`). */
export const DECISION_ADDRESS = /^run-[^:]+:parked-.+:after-\d+$/;

/** A short, stable name of a public key, for the audit trail: `ed25519:` and 16 hex digits of its SHA-256. */
export function keyIdOf(publicKeyHex: string): string {
  return `ed25519:${sha256Hex(publicKeyHex).slice(0, 16)}`;
}
