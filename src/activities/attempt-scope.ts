// What one activity attempt sent to its providers, gathered as it happens: the transports report
// every request they put on the wire into the attempt that is running, wherever in its async call
// tree they are called from.
import { AsyncLocalStorage } from 'node:async_hooks';

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
