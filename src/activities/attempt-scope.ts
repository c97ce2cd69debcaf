// What one activity attempt sent to its providers, gathered as it happens: the transports report
// every request they put on the wire into the attempt that is running, wherever in its async call
// tree they are called from. Its ledger row is on disk before any of them goes out.
import { AsyncLocalStorage } from 'node:async_hooks';
import { log } from '@temporalio/activity';
import { AttemptEndedError } from '../store/errors';
import type { AttemptEnd, OpenAttempt } from '../store/types';

export interface TransportRequest {
  at: string;
  method: string;
  target: string;
  idempotencyKey: string | null;
}

export interface AttemptScope {
  /** When the attempt began on this worker. */
  startedAtMs: number;
  requests: TransportRequest[];
  /** The provider's id for the last request that was answered (Stripe's Request-Id). */
  providerRequestId: string | null;
  /**
   * The deadline of a stamped send (this worker's Date.now()), fixed before its stamp was taken: a
   * request not begun by then is not sent at all, and one on the wire then is cut there.
   */
  sendBy?: number;
  /** The attempt's ledger row (none for attempts run without a store, e.g. in unit tests). */
  ledger?: OpenAttempt;
}

const storage = new AsyncLocalStorage<AttemptScope>();

export function inAttemptScope<T>(scope: AttemptScope, fn: () => Promise<T>): Promise<T> {
  return storage.run(scope, fn);
}

/** The attempt running here, to be told later of what happens (undefined outside an attempt, e.g. in the CLIs). */
export function currentAttemptScope(): AttemptScope | undefined {
  return storage.getStore();
}

/** A request that reached the provider: it was written whole (and so could be acted on). */
export function recordTransportRequest(scope: AttemptScope | undefined, request: Omit<TransportRequest, 'at'>): void {
  scope?.requests.push({ at: new Date().toISOString(), ...request });
}

export function recordProviderRequestId(scope: AttemptScope | undefined, id: string | undefined): void {
  if (scope && id) scope.providerRequestId = id;
}

/** How an attempt that succeeded ends in its ledger: what it sent, and the provider's id for the last answer. */
export function succeeded(scope: AttemptScope): AttemptEnd {
  return {
    transportRequests: scope.requests.length,
    outcome: 'ok',
    certainty: 'completed',
    reason: null,
    retryAfterMs: null,
    nextDelayMs: null,
    providerRequestId: scope.providerRequestId,
  };
}

/**
 * Runs the store call that records the attempt's effect, on the success path: its transaction writes the attempt's
 * end too, so the step commits once rather than twice. Should the attempt fail after all, its end is written again.
 */
export function recordingEffect<T>(fn: () => Promise<T>): Promise<T> {
  const scope = currentAttemptScope();
  return scope?.ledger ? scope.ledger.recording(() => succeeded(scope), fn) : fn();
}

/**
 * Awaited by every transport before a request goes on the wire: the attempt's ledger row is then on disk, so an
 * attempt that never finishes is seen as one. The ledger is evidence, not the effect: a failed write is logged.
 * An attempt that has ended sends nothing more (AttemptEndedError).
 */
export async function beforeRequest(scope: AttemptScope | undefined): Promise<void> {
  try {
    await scope?.ledger?.begun();
  } catch (err) {
    if (err instanceof AttemptEndedError) throw err;
    log.warn('attempt ledger write failed', { error: (err as Error).message });
  }
}
