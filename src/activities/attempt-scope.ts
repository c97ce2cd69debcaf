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
  requests: TransportRequest[];
  /** The provider's id for the last request that was answered (Stripe's Request-Id). */
  providerRequestId: string | null;
}

const storage = new AsyncLocalStorage<AttemptScope>();

export function inAttemptScope<T>(scope: AttemptScope, fn: () => Promise<T>): Promise<T> {
  return storage.run(scope, fn);
}

/** Called by a transport just before it writes a request. Outside an attempt (the CLIs) it records nothing. */
export function recordTransportRequest(request: Omit<TransportRequest, 'at'>): void {
  storage.getStore()?.requests.push({ at: new Date().toISOString(), ...request });
}

export function recordProviderRequestId(id: string | undefined): void {
  const scope = storage.getStore();
  if (scope && id) scope.providerRequestId = id;
}
