// Every error the Stripe SDK can raise, classified into the failure taxonomy by one table. The
// first row that matches decides. Rows are tested one by one in test/unit/stripe-failures.test.ts.
import Stripe from 'stripe';
import { HEALTH_FAILURES } from '../reliability/circuit-breaker';
import { Classified } from './attempt';
import { classifyBy, rule, type Rule } from './failure-rules';
import { storeFailure } from './store-failures';
import { TransportError, type TransportStage } from './stripe-transport';

/** The facts that decide a Stripe error's class. `write`: a POST, which changes something; a read has no effect to doubt. */
export type StripeErrorFacts = ReturnType<typeof stripeFacts> & { write: boolean };

/** Stripe error codes that are the business saying no (the request was understood and refused). */
const STRIPE_BUSINESS_CODES = new Set([
  'amount_too_large',
  'amount_too_small',
  'balance_insufficient',
  'charge_already_refunded',
  'charge_disputed',
  'charge_expired_for_capture',
  'insufficient_funds',
  'payment_intent_unexpected_state',
  'refund_disputed_payment',
  'resource_missing',
]);

const connection = (f: StripeErrorFacts) => f.errorType === 'StripeConnectionError';
/** A connection error after the request got this far (as our transport tells it). */
const lost = (f: StripeErrorFacts, stage: TransportStage) => connection(f) && f.stage === stage;
const status = (f: StripeErrorFacts) => f.statusCode ?? 0;
const serverError = (f: StripeErrorFacts) => status(f) >= 500;
/** The reason is Stripe's own error code when it gave one. */
const codeOr = (fallback: string) => (f: StripeErrorFacts) => f.code ?? fallback;
const unclassified = (f: StripeErrorFacts) => `unclassified_${f.errorType}`;
const rateLimited = (f: StripeErrorFacts) => status(f) === 429 || f.errorType === 'StripeRateLimitError';
const keyInUse = (f: StripeErrorFacts) => status(f) === 409 && f.rawType === 'idempotency_error';
/** A write's 5xx that Stripe stored against the key: a resend would only replay it. */
const errorStored = (f: StripeErrorFacts) => serverError(f) && f.write && f.shouldRetry === 'false';
const businessRefusal = (f: StripeErrorFacts) => STRIPE_BUSINESS_CODES.has(f.code ?? '');

export const STRIPE_RULES: Rule<StripeErrorFacts>[] = [
  // The request never fully left: nothing can have happened.
  rule((f) => lost(f, 'not_sent'), 'TRANSIENT_DEPENDENCY', 'not_executed', 'connection_failed_before_send'),
  // A read that got no answer changed nothing.
  rule((f) => connection(f) && !f.write, 'TRANSIENT_DEPENDENCY', 'not_executed', 'read_failed'),
  // Sent, and the answer never came: the refund may exist. Reconcile; never a blind resend.
  rule((f) => lost(f, 'sent') && f.timedOut, 'UNKNOWN_OUTCOME', 'may_have_executed', 'client_timeout'),
  rule((f) => lost(f, 'sent'), 'UNKNOWN_OUTCOME', 'may_have_executed', 'response_lost'),
  // A connection error from a transport that could not say how far it got.
  rule(connection, 'UNKNOWN_OUTCOME', 'undeterminable', 'connection_error'),
  rule(rateLimited, 'RATE_LIMIT', 'not_executed', codeOr('rate_limited')),
  // Another request with this key is still executing: it may yet succeed. Resend the same key later.
  rule(keyInUse, 'STATE_CONFLICT', 'may_have_executed', 'idempotency_key_in_use'),
  rule((f) => status(f) === 409, 'STATE_CONFLICT', 'not_executed', codeOr('conflict')),
  // The key was used with other parameters: Stripe refused this request outright.
  rule((f) => f.rawType === 'idempotency_error', 'INVALID_ARGUMENTS', 'not_executed', 'idempotency_key_reused'),
  rule((f) => status(f) === 401, 'PERMISSION_DENIED', 'not_executed', 'authentication_failed'),
  rule((f) => status(f) === 403, 'PERMISSION_DENIED', 'not_executed', 'permission_denied'),
  rule(errorStored, 'UNKNOWN_OUTCOME', 'undeterminable', 'provider_error_stored'),
  rule((f) => status(f) === 503, 'CAPACITY', 'not_executed', 'provider_unavailable'),
  rule((f) => serverError(f) && f.write, 'TRANSIENT_DEPENDENCY', 'may_have_executed', 'provider_error'),
  rule(serverError, 'TRANSIENT_DEPENDENCY', 'not_executed', 'provider_error'),
  rule((f) => f.errorType === 'StripeCardError', 'PERMANENT_BUSINESS', 'not_executed', codeOr('card_error')),
  rule((f) => status(f) === 404, 'PERMANENT_BUSINESS', 'not_executed', codeOr('resource_missing')),
  rule(businessRefusal, 'PERMANENT_BUSINESS', 'not_executed', (f) => f.code!),
  rule((f) => status(f) >= 400, 'INVALID_ARGUMENTS', 'not_executed', codeOr('invalid_request')),
  // An SDK error with no status and no connection problem (e.g. an unparseable answer): nobody knows.
  rule((f) => f.write, 'POISON', 'undeterminable', unclassified),
  rule(() => true, 'POISON', 'not_executed', unclassified),
];

/** Classifies an error the SDK threw; undefined when it is not a Stripe error (a bug, rethrown as such). */
export function classifyStripeError(err: unknown, write: boolean, nowMs: number = Date.now()) {
  if (!(err instanceof Stripe.errors.StripeError)) return undefined;
  const transport = transportErrorOf(err.detail);
  // What a failure's details show of the error: every fact but whether the request was a write.
  const provider = stripeFacts(err, transport);
  const facts: StripeErrorFacts = { write, ...provider };
  return {
    ...classifyBy(STRIPE_RULES, facts),
    facts,
    provider,
    requestId: err.requestId ?? null,
    retryAfterMs: retryAfterMs(err.headers?.['retry-after'], nowMs),
    message: transport ? `Stripe: ${err.message} ${transport.message}` : `Stripe: ${err.message}`,
  };
}

function stripeFacts(err: Stripe.errors.StripeError, transport: TransportError | undefined) {
  return {
    /** The SDK's error class name, e.g. StripeConnectionError. */
    errorType: err.type,
    statusCode: err.statusCode ?? null,
    /** Stripe's error.type in the body, e.g. idempotency_error. */
    rawType: (err as { rawType?: string }).rawType ?? null,
    /** Stripe's error.code, e.g. amount_too_large. */
    code: err.code ?? null,
    /** For connection errors: how far the request got, when our transport could tell. */
    stage: transport?.stage ?? null,
    timedOut: transport?.timedOut ?? false,
    /** Stripe's Stripe-Should-Retry header. */
    shouldRetry: err.headers?.['stripe-should-retry'] ?? null,
  };
}

/** Our transport declined to send (its send deadline had passed): nothing about Stripe's health. */
function refusedLocally(err: unknown): boolean {
  const t = transportErrorOf((err as { detail?: unknown }).detail);
  return t !== undefined && t.stage === 'not_sent' && !t.timedOut && t.socketError === null;
}

/** Our transport's error, directly or inside the SDK's wrapper for a cut-off answer. */
function transportErrorOf(detail: unknown): TransportError | undefined {
  if (detail instanceof TransportError) return detail;
  const inner = (detail as { exception?: unknown } | undefined)?.exception;
  return inner instanceof TransportError ? inner : undefined;
}

/** Retry-After is either delay-seconds or an HTTP date; null when absent, past or unreadable. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | null {
  if (value === undefined || value.trim() === '') return null;
  const ms = /^\d+(\.\d+)?$/.test(value.trim()) ? Math.ceil(Number(value) * 1000) : Date.parse(value) - nowMs;
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}

/** A Stripe SDK error (or anything else) as a classified failure. */
export function stripeFailure(err: unknown, write: boolean): Classified {
  if (err instanceof Classified) return err;
  const c = classifyStripeError(err, write);
  if (!c) {
    const message = `unexpected error talking to Stripe: ${(err as Error)?.message ?? String(err)}`;
    const certainty = write ? 'undeterminable' : 'not_executed';
    return new Classified('POISON', certainty, 'unclassified_error', message, { cause: err });
  }
  return new Classified(c.code, c.certainty, c.reason, c.message, {
    retryAfterMs: c.retryAfterMs,
    providerRequestId: c.requestId,
    provider: c.provider,
    cause: err,
    health: HEALTH_FAILURES.has(c.code) && !refusedLocally(err),
  });
}

/** A payment activity's failure: Stripe's errors by the Stripe table; anything else they meet comes from the store. */
export const paymentFailure = (write: boolean) => (err: unknown) =>
  err instanceof Stripe.errors.StripeError ? stripeFailure(err, write) : storeFailure(err);
