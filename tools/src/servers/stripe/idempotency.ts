// Stripe's documented idempotency contract for POSTs: the first response for a key, once the
// endpoint has begun executing, is stored and replayed for the same request; a different request
// with the key is refused; a request racing one still in flight gets a 409.
import { ApiError, type ApiResponse } from './api';
import { canonicalParams, type FormParams } from './form';
import type { Store } from './store';

export const MAX_KEY_LENGTH = 255;

export interface Replay {
  status: number;
  /** The stored body, byte for byte. */
  body: string;
  originalRequestId: string;
}

export function fingerprint(method: string, path: string, params: FormParams): string {
  return `${method} ${path}\n${canonicalParams(params)}`;
}

export function createIdempotency(store: Store, ttlMs: number, now: () => number = Date.now) {
  return {
    /**
     * Answers from the live entry for this key, if any: a replay, or an ApiError for a changed
     * request or one still in flight. Undefined means the request should execute.
     */
    lookup(key: string, print: string): Replay | undefined {
      if (key.length > MAX_KEY_LENGTH) {
        throw new ApiError(400, {
          type: 'invalid_request_error',
          message: `Keys for idempotent requests can only be up to ${MAX_KEY_LENGTH} characters long.`,
          param: 'Idempotency-Key',
        });
      }
      const entry = store.getKey(key);
      if (!entry) return undefined;
      if (entry.createdAtMs + ttlMs <= now()) {
        store.forgetKey(key);
        return undefined;
      }
      store.countKeyRequest(key);
      const [endpoint] = entry.fingerprint.split('\n', 1);
      const [requested] = print.split('\n', 1);
      if (endpoint !== requested) {
        throw idempotencyError(
          400,
          `Keys for idempotent requests can only be used for the same endpoint they were first used for ('${endpoint}' vs '${requested}'). ` +
            `Try using a key other than '${key}' if you meant to execute a different request.`,
        );
      }
      if (entry.fingerprint !== print) {
        throw idempotencyError(
          400,
          'Keys for idempotent requests can only be used with the same parameters they were first used with. ' +
            `Try using a key other than '${key}' if you meant to execute a different request.`,
        );
      }
      if (entry.status === null || entry.body === null) {
        throw idempotencyError(
          409,
          `There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, ` +
            `and the other request is still going through): ${key}. Please try again later.`,
          'idempotency_key_in_use',
        );
      }
      return { status: entry.status, body: entry.body, originalRequestId: entry.requestId };
    },

    /** Marks the key in flight; called only after validation passed, just before execution. */
    begin(key: string, print: string, requestId: string): void {
      store.beginKey(key, print, requestId, now());
    },

    /** Stores the response; call inside the transaction that performed the effect. */
    complete(key: string, response: ApiResponse): void {
      store.completeKey(key, response.status, render(response.body));
    },

    /** Forgets a key whose request never reached the endpoint, so a retry may execute. */
    release(key: string): void {
      store.forgetKey(key);
    },
  };
}

export type Idempotency = ReturnType<typeof createIdempotency>;

function idempotencyError(status: number, message: string, code?: string): ApiError {
  return new ApiError(status, { type: 'idempotency_error', message, ...(code && { code }) });
}

/** Stripe pretty-prints its JSON; stored and fresh responses share one rendering. */
export function render(body: unknown): string {
  return `${JSON.stringify(body, null, 2)}\n`;
}
