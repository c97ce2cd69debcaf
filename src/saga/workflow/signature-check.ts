// A decision's signature, checked in the `decide` Update's validator: Ed25519 in pure JS (@noble/curves, preloaded:
// src/workflows/preload.ts) against the decider's key, addressed to this run and parking, unexpired, not taken before.
import { ed25519 } from '@noble/curves/ed25519';
import {
  decisionStatement,
  keyIdOf,
  MAX_SIGNATURE_TTL_MS,
  SIGNATURE_CLOCK_SKEW_MS,
  type DecisionRecord,
  type ParsedDecision,
} from '../../contract';
import type { DecisionPolicy } from '../../reliability/policy';

const SIGN_HOW = 'sign it with `npm run decide -- … --key <file>` (docs/production.md, "Signed decisions")';

/**
 * The key id that signed `d`, or null for an unsigned decision the policy lets through: `reconcile`
 * (it only looks) or DECISIONS_UNSIGNED=allow. A policy without keys (a worker of earlier code
 * answering) knows no decider's key: only `reconcile` passes. Throws, naming the problem, for anything else.
 */
export function checkSignature(
  d: ParsedDecision,
  policy: DecisionPolicy,
  to: { workflowId: string; /** decisionAddress of the run now. */ address: string },
): string | null {
  const keys = (policy as Partial<DecisionPolicy>).keys ?? {};
  const s = d.signed;
  if (!s) {
    if (d.decision === 'reconcile' || policy.unsigned === 'allow') return null;
    throw new Error(`unsigned decision refused: ${d.decision} needs ${d.by}'s signature; ${SIGN_HOW}`);
  }
  if (s.workflowId !== to.workflowId)
    throw new Error(`the signed decision is addressed to ${s.workflowId}, not to this run (${to.workflowId})`);
  refuseMoved(s.answers, to.address);
  const expiresAt = Date.parse(s.expiresAt);
  if (!Number.isFinite(expiresAt)) throw new Error(`the signature's expiry ${s.expiresAt} is no real date`);
  if (Date.now() >= expiresAt) throw new Error(`the signature expired at ${s.expiresAt}; sign the decision again`);
  if (expiresAt - Date.now() > MAX_SIGNATURE_TTL_MS + SIGNATURE_CLOCK_SKEW_MS)
    throw new Error(
      `the signature is valid until ${s.expiresAt}: more than ${MAX_SIGNATURE_TTL_MS / 3600_000} h ahead`,
    );
  const key = keys[d.by];
  if (!key) throw new Error(`${d.by} has no public key in the decision policy (DECIDERS name=roles:key)`);
  let verified = false;
  try {
    // Strict RFC 8032 verification, as node:crypto's: no non-canonical encodings (ZIP-215 would accept them).
    verified = ed25519.verify(s.signature, new TextEncoder().encode(decisionStatement(d, s)), key, { zip215: false });
  } catch {
    // a signature or key that is no curve point: not verified
  }
  if (!verified)
    throw new Error(
      `the signature does not verify with ${d.by}'s key ${keyIdOf(key)}: the decision was changed after signing, or signed with another key`,
    );
  return keyIdOf(key);
}

/** A decision answers the parking its decider read: one the run has left (it parked again, or took a decision since) is refused. */
export function refuseMoved(answers: string | undefined, address: string): void {
  if (answers !== undefined && answers !== address)
    throw new Error(
      `the decision answers ${answers}, but the run is now at ${address} (it parked again or took a decision since): look at it again and decide anew`,
    );
}

/** A signed decision is taken once: checked first, so that a replay is named as one whatever the run's state. */
export function refuseReplayed(d: ParsedDecision, records: readonly DecisionRecord[]): void {
  const taken = d.signed && records.find((r) => r.nonce === d.signed!.nonce);
  if (taken)
    throw new Error(
      `replayed: this signed decision (nonce ${taken.nonce}) was already taken as decision #${taken.seq}`,
    );
}
