// The Stripe mapping table, row by row: each row has an example that reaches it first, and every
// row has one, so a row added without a test fails here.
import Stripe from 'stripe';
import { classifyStripeError, retryAfterMs, STRIPE_RULES, stripeFailure } from '../../src/activities/stripe-failures';
import { TransportError } from '../../src/activities/stripe-transport';

type Raw = NonNullable<ConstructorParameters<typeof Stripe.errors.StripeError>[0]>;

// StripeError.generate is what the SDK itself calls on an error response.
const response = (raw: Raw) => Stripe.errors.StripeError.generate({ message: 'boom', requestId: 'req_1', ...raw });
const connection = (detail?: Error) =>
  new Stripe.errors.StripeConnectionError({ message: 'An error occurred with our connection to Stripe.', detail });
const sdkBodyError = (inner: TransportError) => Stripe.HttpClient.makeResponseBodyError(inner);

const notSent = new TransportError('not_sent', false, 'ECONNREFUSED', 'refused');
const sentLost = new TransportError('sent', false, 'ECONNRESET', 'reset after send');
const sentTimeout = new TransportError('sent', true, null, 'no answer');

const examples: [string, unknown, boolean, { code: string; certainty: string; reason: string }][] = [
  [
    'connection refused before the request left',
    connection(notSent),
    true,
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'connection_failed_before_send' },
  ],
  [
    'a read whose answer was lost',
    connection(sentLost),
    false,
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'read_failed' },
  ],
  [
    'a write that timed out after it was sent',
    connection(sentTimeout),
    true,
    { code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'client_timeout' },
  ],
  [
    'a write whose connection reset after it was sent',
    connection(sentLost),
    true,
    { code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'response_lost' },
  ],
  [
    'a write whose answer was cut off mid-body',
    connection(sdkBodyError(sentLost)),
    true,
    { code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'response_lost' },
  ],
  [
    'a write failing in a transport that cannot say how far it got',
    connection(new Error('socket hang up')),
    true,
    { code: 'UNKNOWN_OUTCOME', certainty: 'undeterminable', reason: 'connection_error' },
  ],
  [
    '429',
    response({ statusCode: 429, type: 'invalid_request_error', headers: { 'retry-after': '3' } }),
    true,
    { code: 'RATE_LIMIT', certainty: 'not_executed', reason: 'rate_limited' },
  ],
  [
    '409 key in flight',
    response({ statusCode: 409, type: 'idempotency_error', code: 'idempotency_key_in_use' }),
    true,
    { code: 'STATE_CONFLICT', certainty: 'may_have_executed', reason: 'idempotency_key_in_use' },
  ],
  [
    '409 lock timeout',
    response({ statusCode: 409, type: 'invalid_request_error', code: 'lock_timeout' }),
    true,
    { code: 'STATE_CONFLICT', certainty: 'not_executed', reason: 'lock_timeout' },
  ],
  [
    '400 key reused with other parameters',
    response({ statusCode: 400, type: 'idempotency_error' }),
    true,
    { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'idempotency_key_reused' },
  ],
  [
    '401',
    response({ statusCode: 401, type: 'invalid_request_error' }),
    true,
    { code: 'PERMISSION_DENIED', certainty: 'not_executed', reason: 'authentication_failed' },
  ],
  [
    '403',
    response({ statusCode: 403, type: 'invalid_request_error' }),
    true,
    { code: 'PERMISSION_DENIED', certainty: 'not_executed', reason: 'permission_denied' },
  ],
  [
    '500 Stripe stored against the key',
    response({ statusCode: 500, type: 'api_error', headers: { 'stripe-should-retry': 'false' } }),
    true,
    { code: 'UNKNOWN_OUTCOME', certainty: 'undeterminable', reason: 'provider_error_stored' },
  ],
  [
    '503',
    response({ statusCode: 503, type: 'api_error' }),
    true,
    { code: 'CAPACITY', certainty: 'not_executed', reason: 'provider_unavailable' },
  ],
  [
    '500 on a write',
    response({ statusCode: 500, type: 'api_error' }),
    true,
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'may_have_executed', reason: 'provider_error' },
  ],
  [
    '502 on a read',
    response({ statusCode: 502, type: 'api_error' }),
    false,
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'provider_error' },
  ],
  [
    '402 card error',
    response({ statusCode: 402, type: 'card_error', code: 'card_declined' }),
    true,
    { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'card_declined' },
  ],
  [
    '404 missing payment intent',
    response({ statusCode: 404, type: 'invalid_request_error', code: 'resource_missing' }),
    true,
    { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'resource_missing' },
  ],
  [
    '400 more than refundable',
    response({ statusCode: 400, type: 'invalid_request_error', code: 'amount_too_large' }),
    true,
    { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'amount_too_large' },
  ],
  [
    '400 bad parameter',
    response({ statusCode: 400, type: 'invalid_request_error', code: 'parameter_invalid_integer' }),
    true,
    { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'parameter_invalid_integer' },
  ],
  [
    'an unreadable answer to a write',
    new Stripe.errors.StripeAPIError({ message: 'Invalid JSON received from the Stripe API' }),
    true,
    { code: 'POISON', certainty: 'undeterminable', reason: 'unclassified_StripeAPIError' },
  ],
  [
    'an unreadable answer to a read',
    new Stripe.errors.StripeAPIError({ message: 'Invalid JSON received from the Stripe API' }),
    false,
    { code: 'POISON', certainty: 'not_executed', reason: 'unclassified_StripeAPIError' },
  ],
];

const rowOf = (err: unknown, write: boolean) =>
  STRIPE_RULES.findIndex((r) => r.when(classifyStripeError(err, write)!.facts));

it.each(examples)('%s', (_label, err, write, expected) => {
  expect(classifyStripeError(err, write)).toMatchObject(expected);
});

it('has an example for every row of the table', () => {
  const reached = new Set(examples.map(([, err, write]) => rowOf(err, write)));
  const untested = STRIPE_RULES.map((_r, i) => i).filter((i) => !reached.has(i));
  expect(untested).toEqual([]);
});

it('keeps what reconciliation needs: the request id, the error code and Retry-After', () => {
  const c = classifyStripeError(
    response({ statusCode: 429, type: 'invalid_request_error', headers: { 'retry-after': '3' } }),
    true,
  )!;
  expect(c).toMatchObject({ requestId: 'req_1', retryAfterMs: 3000 });
  const failure = stripeFailure(
    response({ statusCode: 400, type: 'invalid_request_error', code: 'amount_too_large', param: 'amount' }),
    true,
  );
  expect(failure.extra).toMatchObject({
    providerRequestId: 'req_1',
    provider: { statusCode: 400, code: 'amount_too_large' },
  });
  expect(failure.extra.cause).toBeInstanceOf(Stripe.errors.StripeError);
});

it('reads Retry-After as seconds or as an HTTP date', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  expect(retryAfterMs('2', now)).toBe(2000);
  expect(retryAfterMs('Thu, 01 Jan 2026 00:00:10 GMT', now)).toBe(10_000);
  expect(retryAfterMs('Thu, 01 Jan 2025 00:00:10 GMT', now)).toBeNull();
  expect(retryAfterMs(undefined, now)).toBeNull();
  expect(retryAfterMs('soon', now)).toBeNull();
});

it('classifies an error that is not from Stripe as poison, never as a success or a refusal', () => {
  expect(classifyStripeError(new TypeError('bug'), true)).toBeUndefined();
  expect(stripeFailure(new TypeError('bug'), true)).toMatchObject({ code: 'POISON', certainty: 'undeterminable' });
});
