// How a run waits: for the provider, as the policy's awaitProvider paces it, and no less than 1 ms.
import { backoffDelay, withJitter, type RecoveryPolicy } from '../../reliability/policy';
import { DEFAULT_AWAIT_PROVIDER } from '../../reliability/policy-terms';

/**
 * The wait to pass to condition(fn, ms): at least 1 ms, since condition(fn, 0) asks patched() itself, which after a
 * local activity can land in another workflow task on replay than it did live.
 */
export function conditionTimeout(ms: number): number {
  return Math.max(1, ms);
}

/** How a run waits for the provider to settle what it asked (the refund's gate, an undo's pending refund): the policy's awaitProvider. */
export const awaitProvider = (policy?: RecoveryPolicy) => policy?.awaitProvider ?? DEFAULT_AWAIT_PROVIDER;

/** The wait before the provider is asked again, after `polls` looks, with awaitProvider's backoff: never past `until`. */
export function nextLook({ poll, jitter }: ReturnType<typeof awaitProvider>, polls: number, until: number): number {
  return Math.min(until - Date.now(), withJitter(backoffDelay({ backoff: poll }, polls), jitter, Math.random()));
}
