// Stripe-shaped responses, errors and ids shared by the local Stripe server's modules.
import { randomBytes } from 'node:crypto';

export interface ApiResponse {
  status: number;
  body: unknown;
}

export interface StripeErrorBody {
  type: 'invalid_request_error' | 'idempotency_error' | 'authentication_error' | 'api_error';
  message: string;
  code?: string;
  param?: string;
  doc_url?: string;
}

/** A Stripe-shaped error response, thrown by validation and by endpoints. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: StripeErrorBody,
  ) {
    super(error.message);
  }

  toResponse(): ApiResponse {
    return { status: this.status, body: { error: this.error } };
  }
}

export function invalidRequest(
  message: string,
  extra: { code?: string; param?: string; status?: number } = {},
): ApiError {
  const { status = 400, ...rest } = extra;
  const docUrl = rest.code ? `https://stripe.com/docs/error-codes/${rest.code.replaceAll('_', '-')}` : undefined;
  return new ApiError(status, { type: 'invalid_request_error', message, ...rest, ...(docUrl && { doc_url: docUrl }) });
}

export function resourceMissing(kind: string, id: string, param: string): ApiError {
  return invalidRequest(`No such ${kind}: '${id}'`, { status: 404, code: 'resource_missing', param });
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Stripe-style ids: a type prefix and random base62 characters, unique across restarts. */
export function newId(prefix: string, length = 24): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return `${prefix}_${out}`;
}

export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}
