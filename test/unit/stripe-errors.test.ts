import Stripe from 'stripe';
import { stripeErrorToFailure } from '../../src/activities/payments';
import { FailureType, NON_RETRYABLE_FAILURES } from '../../src/reliability/failures';

type Raw = ConstructorParameters<typeof Stripe.errors.StripeError>[0];

// StripeError.generate is what the SDK itself calls on an error response.
function fromResponse(raw: NonNullable<Raw>): Stripe.errors.StripeError {
  return Stripe.errors.StripeError.generate({ message: 'boom', requestId: 'req_1', ...raw });
}

function map(err: unknown, nowMs?: number) {
  const failure = stripeErrorToFailure(err, nowMs);
  if (!failure) throw new Error('expected a failure');
  return failure;
}

it('maps business errors to a non-retryable PAYMENT_REJECTED carrying Stripe code', () => {
  const failure = map(fromResponse({ statusCode: 400, type: 'invalid_request_error', code: 'amount_too_large', param: 'amount' }));
  expect(failure).toMatchObject({ type: FailureType.PaymentRejected, nonRetryable: true });
  expect(failure.message).toContain('boom');
  expect(failure.details?.[0]).toMatchObject({ code: 'amount_too_large', param: 'amount', statusCode: 400, requestId: 'req_1' });
  expect(map(fromResponse({ statusCode: 404, type: 'invalid_request_error', code: 'resource_missing' }))).toMatchObject({
    type: FailureType.PaymentRejected,
    nonRetryable: true,
  });
  expect(map(fromResponse({ statusCode: 402, type: 'card_error', code: 'card_declined' }))).toMatchObject({
    type: FailureType.PaymentRejected,
    nonRetryable: true,
  });
});

it('tells a reused key (400) from a key still in flight (409)', () => {
  expect(map(fromResponse({ statusCode: 400, type: 'idempotency_error' }))).toMatchObject({
    type: FailureType.IdempotencyKeyReused,
    nonRetryable: true,
  });
  // The SDK turns a 409 into a plain StripeAPIError; only the raw type says it is about the key.
  const inFlight = fromResponse({ statusCode: 409, type: 'idempotency_error', code: 'idempotency_key_in_use' });
  expect(inFlight.type).toBe('StripeAPIError');
  expect(map(inFlight)).toMatchObject({ type: FailureType.IdempotencyKeyInFlight, nonRetryable: false });
  expect(map(fromResponse({ statusCode: 409, type: 'invalid_request_error', code: 'lock_timeout' }))).toMatchObject({
    type: FailureType.DependencyUnavailable,
    nonRetryable: false,
  });
});

it('maps 401 and 403 to a non-retryable PERMISSION_DENIED', () => {
  for (const statusCode of [401, 403]) {
    expect(map(fromResponse({ statusCode, type: 'invalid_request_error' }))).toMatchObject({
      type: FailureType.PermissionDenied,
      nonRetryable: true,
    });
  }
});

it('maps 429 to a retryable RATE_LIMIT that waits as long as Retry-After asks', () => {
  const seconds = map(fromResponse({ statusCode: 429, type: 'invalid_request_error', headers: { 'retry-after': '3' } }));
  expect(seconds).toMatchObject({ type: FailureType.RateLimited, nonRetryable: false, nextRetryDelay: 3000 });
  const now = Date.parse('2026-01-01T00:00:00Z');
  const date = map(fromResponse({ statusCode: 429, headers: { 'retry-after': 'Thu, 01 Jan 2026 00:00:10 GMT' } }), now);
  expect(date.nextRetryDelay).toBe(10_000);
  expect(map(fromResponse({ statusCode: 429 })).nextRetryDelay).toBeUndefined();
  expect(map(fromResponse({ statusCode: 400, type: 'invalid_request_error', code: 'rate_limit' }))).toMatchObject({
    type: FailureType.RateLimited,
    nonRetryable: false,
  });
});

it('maps 5xx and connection failures to a retryable DEPENDENCY_UNAVAILABLE', () => {
  for (const statusCode of [500, 502, 503]) {
    expect(map(fromResponse({ statusCode, type: 'api_error' }))).toMatchObject({
      type: FailureType.DependencyUnavailable,
      nonRetryable: false,
    });
  }
  const connection = new Stripe.errors.StripeConnectionError({ message: 'An error occurred with our connection to Stripe.' });
  expect(map(connection)).toMatchObject({ type: FailureType.DependencyUnavailable, nonRetryable: false });
  const timeout = new Stripe.errors.StripeConnectionError({ message: 'Request aborted due to timeout being reached (20000ms)' });
  expect(map(timeout)).toMatchObject({ type: FailureType.DependencyUnavailable, nonRetryable: false });
});

it('stops retrying a 5xx when Stripe says a resend would only replay it', () => {
  const failure = map(fromResponse({ statusCode: 500, type: 'api_error', headers: { 'stripe-should-retry': 'false' } }));
  expect(failure).toMatchObject({ type: FailureType.DependencyUnavailable, nonRetryable: true });
  expect(failure.details?.[0]).toMatchObject({ stripeShouldRetry: 'false' });
});

it('agrees with the retry policy about which types are non-retryable', () => {
  const samples = [
    fromResponse({ statusCode: 400, type: 'invalid_request_error', code: 'amount_too_large' }),
    fromResponse({ statusCode: 400, type: 'idempotency_error' }),
    fromResponse({ statusCode: 409, type: 'idempotency_error' }),
    fromResponse({ statusCode: 401 }),
    fromResponse({ statusCode: 429 }),
    fromResponse({ statusCode: 503 }),
    new Stripe.errors.StripeConnectionError({ message: 'down' }),
  ];
  for (const err of samples) {
    const failure = map(err);
    const expected = NON_RETRYABLE_FAILURES.includes(failure.type as FailureType);
    expect({ type: failure.type, nonRetryable: failure.nonRetryable }).toEqual({ type: failure.type, nonRetryable: expected });
  }
});

it('leaves errors that are not from Stripe alone', () => {
  expect(stripeErrorToFailure(new TypeError('bug'))).toBeUndefined();
  expect(stripeErrorToFailure('nope')).toBeUndefined();
});
