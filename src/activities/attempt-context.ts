// One attempt of a step's activity, as the attempt runner hands it to the activity's body: who acts, when it began
// and how long it may run, its ledger row, and what it sent to its providers. The body passes it to whatever sends
// (its transports report each request put on the wire into it), so nothing has to be found from the call stack.
import { log } from '@temporalio/activity';
import { AttemptEndedError } from '../store/errors';
import type { AttemptEnd, OpenAttempt } from '../store';

export interface TransportRequest {
  at: string;
  method: string;
  target: string;
  idempotencyKey: string | null;
}

export interface Attempt {
  /** Who acts in the audit trail: the run, by its workflow id. */
  readonly actor: string;
  /** When the attempt began on this worker (Date.now()). */
  readonly startedAtMs: number;
  /** The attempt's own start-to-close, as the run's pinned policy scheduled it (undefined: none). */
  readonly startToCloseMs?: number;
  readonly requests: TransportRequest[];
  /** The provider's id for the last request that was answered (Stripe's Request-Id). */
  providerRequestId: string | null;
  /**
   * The deadline of a stamped send (this worker's Date.now()), fixed before its stamp was taken: a
   * request not begun by then is not sent at all, and one on the wire then is cut there.
   */
  sendBy?: number;
  /** The attempt's ledger row (none for attempts run without a store, e.g. in unit tests). */
  readonly ledger?: OpenAttempt;
}

/** A request that reached the provider: it was written whole (and so could be acted on). */
export function recordTransportRequest(attempt: Attempt | undefined, request: Omit<TransportRequest, 'at'>): void {
  attempt?.requests.push({ at: new Date().toISOString(), ...request });
}

export function recordProviderRequestId(attempt: Attempt | undefined, id: string | undefined): void {
  if (attempt && id) attempt.providerRequestId = id;
}

/** How an attempt that succeeded ends in its ledger: what it sent, and the provider's id for the last answer. */
export function succeeded(attempt: Attempt): AttemptEnd {
  return {
    transportRequests: attempt.requests.length,
    outcome: 'ok',
    certainty: 'completed',
    reason: null,
    retryAfterMs: null,
    nextDelayMs: null,
    providerRequestId: attempt.providerRequestId,
  };
}

/**
 * Runs the store call that records the attempt's effect, on the success path: its transaction writes the attempt's
 * end too, so the step commits once rather than twice. Should the attempt fail after all, its end is written again.
 */
export function recordingEffect<T>(attempt: Attempt, fn: () => Promise<T>): Promise<T> {
  return attempt.ledger ? attempt.ledger.recording(() => succeeded(attempt), fn) : fn();
}

/**
 * Awaited by every transport before a request goes on the wire: the attempt's ledger row is then on disk, so an
 * attempt that never finishes is seen as one. The ledger is evidence, not the effect: a failed write is logged.
 * An attempt that has ended sends nothing more (AttemptEndedError).
 */
export async function beforeRequest(attempt: Attempt | undefined): Promise<void> {
  try {
    await attempt?.ledger?.begun();
  } catch (err) {
    if (err instanceof AttemptEndedError) throw err;
    log.warn('attempt ledger write failed', { error: (err as Error).message });
  }
}
