// The endpoints the app uses: payment intents (seeded by the demo) and refunds.
import { ApiResponse, invalidRequest, newId, resourceMissing, unixNow } from './api';
import type { FormParams } from './form';
import {
  metadataParam,
  optionalBoolean,
  optionalEnum,
  optionalHash,
  optionalInteger,
  optionalString,
  optionalStringList,
  rejectUnknown,
  requiredString,
} from './params';
import { EVENT_TYPES } from './events';
import type { PaymentIntentObject, RefundObject, Store } from './store';

export interface EndpointContext {
  store: Store;
  idempotencyKey: string | null;
  requestId: string;
  lifecycle: RefundLifecycle;
}

/** When refunds on the test payment methods change after they were created. */
export interface RefundLifecycle {
  /** A refund on pm_card_refundPending stays pending this long, then succeeds. */
  settleDelayMs: number;
  /** A refund on pm_card_refundFail succeeds, and this long after moves to failed (0: at once, before any read). */
  failDelayMs: number;
}

/**
 * Validates the params (throwing ApiError before the endpoint starts executing) and returns
 * the execution, which runs in one SQLite transaction together with the stored idempotent response.
 */
type Endpoint = (params: FormParams, pathArgs: string[]) => (ctx: EndpointContext) => ApiResponse;

export interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  path: RegExp;
  endpoint: Endpoint;
}

/** Stripe's test card whose refunds are accepted as succeeded and later move to failed. */
export const REFUND_FAIL_PAYMENT_METHOD = 'pm_card_refundFail';
/** Our own test card whose refunds are pending at first and settle (succeed) after a delay. */
export const REFUND_PENDING_PAYMENT_METHOD = 'pm_card_refundPending';

const REFUND_REASONS = ['duplicate', 'fraudulent', 'requested_by_customer'] as const;

const createPaymentIntent: Endpoint = (params) => {
  rejectUnknown(params, [
    'amount',
    'currency',
    'payment_method',
    'payment_method_types',
    'confirm',
    'automatic_payment_methods',
    'return_url',
    'metadata',
    'description',
    'expand',
  ]);
  const amount = optionalInteger(params, 'amount');
  if (amount === undefined)
    throw invalidRequest('Missing required param: amount.', { code: 'parameter_missing', param: 'amount' });
  if (amount < 1) throw invalidRequest('Amount must be at least 1', { code: 'amount_too_small', param: 'amount' });
  const currency = requiredString(params, 'currency').toLowerCase();
  if (!/^[a-z]{3}$/.test(currency)) throw invalidRequest(`Invalid currency: ${currency}`, { param: 'currency' });
  const paymentMethod = optionalString(params, 'payment_method');
  if (paymentMethod !== undefined && !paymentMethod.startsWith('pm_')) {
    throw invalidRequest(`No such PaymentMethod: '${paymentMethod}'`, {
      code: 'resource_missing',
      param: 'payment_method',
    });
  }
  const paymentMethodTypes = optionalStringList(params, 'payment_method_types');
  const apmHash = optionalHash(params, 'automatic_payment_methods');
  const apm = apmHash && {
    enabled: optionalBoolean(apmHash, 'enabled') ?? false,
    allowRedirects: optionalEnum(apmHash, 'allow_redirects', ['always', 'never'] as const),
  };
  const confirm = optionalBoolean(params, 'confirm') ?? false;
  const returnUrl = optionalString(params, 'return_url');
  const description = optionalString(params, 'description') ?? null;
  const metadata = metadataParam(params);
  optionalStringList(params, 'expand');

  // Since API version 2023-08-16 Stripe enables automatic payment methods unless types are listed.
  const automatic = apm ?? (paymentMethodTypes ? undefined : { enabled: true, allowRedirects: undefined });
  if (confirm && paymentMethod === undefined) {
    throw invalidRequest("You cannot confirm this PaymentIntent because it's missing a payment method.", {
      code: 'payment_intent_unexpected_state',
      param: 'payment_method',
    });
  }
  // Real Stripe refuses this too, so a seed that works here also works against Stripe's test mode.
  if (confirm && automatic?.enabled && automatic.allowRedirects !== 'never' && returnUrl === undefined) {
    throw invalidRequest(
      'This PaymentIntent is configured to accept payment methods that may redirect the customer, so you must provide a `return_url`. ' +
        'To accept only non-redirecting methods, set `automatic_payment_methods[allow_redirects]` to `never`.',
      { param: 'return_url' },
    );
  }

  return ({ store, idempotencyKey }) => {
    const id = newId('pi');
    // Stripe's test cards that decline: the PaymentIntent exists, nothing is charged, the answer is a 402 card_error.
    const decline = confirm && paymentMethod ? DECLINES[paymentMethod] : undefined;
    const succeeded = confirm && !decline;
    const pi: PaymentIntentObject = {
      id,
      object: 'payment_intent',
      amount,
      amount_capturable: 0,
      amount_received: succeeded ? amount : 0,
      automatic_payment_methods: automatic
        ? { enabled: automatic.enabled, ...(automatic.allowRedirects && { allow_redirects: automatic.allowRedirects }) }
        : null,
      capture_method: 'automatic',
      client_secret: `${id}_secret_${newId('s').slice(2)}`,
      confirmation_method: 'automatic',
      created: unixNow(),
      currency,
      description,
      latest_charge: succeeded ? newId('ch') : null,
      livemode: false,
      metadata,
      payment_method: paymentMethod ?? null,
      payment_method_types: paymentMethodTypes ?? ['card'],
      status: succeeded ? 'succeeded' : paymentMethod && !decline ? 'requires_confirmation' : 'requires_payment_method',
      last_payment_error: decline ? { type: 'card_error', ...decline } : null,
    };
    store.insertPaymentIntent(pi);
    store.recordEffect({ type: 'payment_intent.created', objectId: id, paymentIntentId: id, amount, idempotencyKey });
    if (succeeded)
      store.recordEffect({
        type: 'charge.succeeded',
        objectId: pi.latest_charge!,
        paymentIntentId: id,
        amount,
        idempotencyKey,
      });
    if (decline) return { status: 402, body: { error: { type: 'card_error', ...decline, payment_intent: pi } } };
    return { status: 200, body: pi };
  };
};

/** Stripe's test payment methods that decline, and what the decline says. */
const DECLINES: Record<string, { code: string; decline_code: string; message: string }> = {
  pm_card_chargeDeclined: {
    code: 'card_declined',
    decline_code: 'generic_decline',
    message: 'Your card was declined.',
  },
  pm_card_chargeDeclinedInsufficientFunds: {
    code: 'card_declined',
    decline_code: 'insufficient_funds',
    message: 'Your card has insufficient funds.',
  },
};

/** The Search API's one query form this server knows: `metadata['key']:'value'`, what a lookup by operation id sends. */
const searchPaymentIntents: Endpoint = (params) => {
  rejectUnknown(params, ['query', 'limit', 'page', 'expand']);
  const query = requiredString(params, 'query');
  const match = /^metadata\['([^']+)'\]:'([^']*)'$/.exec(query.trim());
  if (!match)
    throw invalidRequest(`this server searches only by metadata['key']:'value', not: ${query}`, { param: 'query' });
  const [, key, value] = match;
  const limit = optionalInteger(params, 'limit') ?? 10;
  return ({ store }) => {
    // Newest first, as Stripe's search answers.
    const found = store.searchPaymentIntents((pi) => pi.metadata[key!] === value).reverse();
    return {
      status: 200,
      body: {
        object: 'search_result',
        url: '/v1/payment_intents/search',
        data: found.slice(0, limit),
        has_more: found.length > limit,
        next_page: null,
      },
    };
  };
};

const retrievePaymentIntent: Endpoint = (params, [id]) => {
  rejectUnknown(params, ['expand', 'client_secret']);
  return ({ store }) => {
    const pi = store.getPaymentIntent(id!);
    if (!pi) throw resourceMissing('payment_intent', id!, 'intent');
    return { status: 200, body: pi };
  };
};

const createRefund: Endpoint = (params) => {
  rejectUnknown(params, ['payment_intent', 'amount', 'reason', 'metadata', 'expand']);
  const paymentIntentId = requiredString(params, 'payment_intent');
  const amount = optionalInteger(params, 'amount');
  if (amount !== undefined && amount < 1) {
    throw invalidRequest('Refund amount must be at least 1', { code: 'amount_too_small', param: 'amount' });
  }
  const reason = optionalEnum(params, 'reason', REFUND_REASONS) ?? null;
  const metadata = metadataParam(params);
  optionalStringList(params, 'expand');

  return ({ store, idempotencyKey, requestId, lifecycle }) => {
    const pi = store.getPaymentIntent(paymentIntentId);
    if (!pi) throw resourceMissing('payment_intent', paymentIntentId, 'payment_intent');
    if (pi.status !== 'succeeded' || !pi.latest_charge) {
      throw invalidRequest(`This PaymentIntent (${pi.id}) does not have a successful charge to refund.`, {
        code: 'payment_intent_unexpected_state',
        param: 'payment_intent',
      });
    }
    // Failed and canceled refunds give their amount back to the charge.
    const refunded = store
      .refundsFor(pi.id)
      .filter((r) => r.status === 'pending' || r.status === 'succeeded')
      .reduce((sum, r) => sum + r.amount, 0);
    const remaining = pi.amount - refunded;
    if (remaining <= 0) {
      throw invalidRequest(`Charge ${pi.latest_charge} has already been refunded.`, {
        code: 'charge_already_refunded',
      });
    }
    const refundAmount = amount ?? remaining;
    if (refundAmount > remaining) {
      throw invalidRequest(
        `Refund amount (${refundAmount} ${pi.currency}) is greater than unrefunded amount on charge (${remaining} ${pi.currency})`,
        { code: 'amount_too_large', param: 'amount' },
      );
    }
    const refund: RefundObject = {
      id: newId('re'),
      object: 'refund',
      amount: refundAmount,
      balance_transaction: newId('txn'),
      charge: pi.latest_charge,
      created: unixNow(),
      currency: pi.currency,
      metadata,
      payment_intent: pi.id,
      reason,
      receipt_number: null,
      status: pi.payment_method === REFUND_PENDING_PAYMENT_METHOD ? 'pending' : 'succeeded',
    };
    store.insertRefund(refund);
    store.recordEffect({
      type: 'refund.created',
      objectId: refund.id,
      paymentIntentId: pi.id,
      amount: refundAmount,
      idempotencyKey,
    });
    const request = { id: requestId, idempotencyKey };
    store.events.emit('refund.created', refund, request);
    if (pi.payment_method === REFUND_PENDING_PAYMENT_METHOD)
      store.events.scheduleTransition(refund.id, 'succeeded', Date.now() + lifecycle.settleDelayMs, null);
    if (pi.payment_method === REFUND_FAIL_PAYMENT_METHOD) {
      // The creating response still says succeeded; every read after the delay sees the failure, as on Stripe.
      if (lifecycle.failDelayMs > 0)
        store.events.scheduleTransition(
          refund.id,
          'failed',
          Date.now() + lifecycle.failDelayMs,
          'expired_or_canceled_card',
        );
      else changeRefund(store, refund.id, 'failed', 'expired_or_canceled_card', request);
    }
    return { status: 200, body: refund };
  };
};

const retrieveRefund: Endpoint = (params, [id]) => {
  rejectUnknown(params, ['expand']);
  return ({ store }) => {
    const refund = store.getRefund(id!);
    if (!refund) throw resourceMissing('refund', id!, 'refund');
    return { status: 200, body: refund };
  };
};

const listRefunds: Endpoint = (params) => {
  rejectUnknown(params, ['payment_intent', 'limit', 'starting_after', 'expand']);
  const paymentIntent = optionalString(params, 'payment_intent');
  const limit = optionalInteger(params, 'limit') ?? 10;
  if (limit < 1 || limit > 100) {
    throw invalidRequest('Invalid limit: must be an integer between 1 and 100', { param: 'limit' });
  }
  const startingAfter = optionalString(params, 'starting_after');
  optionalStringList(params, 'expand');

  return ({ store }) => {
    if (paymentIntent !== undefined && !store.getPaymentIntent(paymentIntent)) {
      throw resourceMissing('payment_intent', paymentIntent, 'payment_intent');
    }
    const page = store.listRefunds({ paymentIntent, limit, startingAfter });
    if (!page) throw resourceMissing('refund', startingAfter!, 'starting_after');
    return { status: 200, body: { object: 'list', data: page.data, has_more: page.hasMore, url: '/v1/refunds' } };
  };
};

/** A refund's later change, with the events Stripe sends for it. */
export function changeRefund(
  store: Store,
  refundId: string,
  status: 'succeeded' | 'failed',
  failureReason: string | null,
  request = { id: null as string | null, idempotencyKey: null as string | null },
): void {
  const before = store.getRefund(refundId);
  if (!before || before.status === status || before.status === 'failed' || before.status === 'canceled') return;
  const after: RefundObject = { ...before, status, ...(failureReason && { failure_reason: failureReason }) };
  store.updateRefund(after);
  const previous = { status: before.status };
  if (status === 'failed') store.events.emit('refund.failed', after, request, previous);
  store.events.emit('refund.updated', after, request, previous);
  store.events.emit('charge.refund.updated', after, request, previous);
}

const createWebhookEndpoint: Endpoint = (params) => {
  rejectUnknown(params, ['url', 'enabled_events', 'description', 'metadata', 'api_version', 'expand']);
  const url = requiredString(params, 'url');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidRequest(`Invalid URL: ${url}`, { param: 'url' });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw invalidRequest(`Invalid URL: ${url} must be http or https`, { param: 'url' });
  const enabled = optionalStringList(params, 'enabled_events');
  if (!enabled || enabled.length === 0)
    throw invalidRequest('Missing required param: enabled_events.', {
      code: 'parameter_missing',
      param: 'enabled_events',
    });
  const unknown = enabled.filter((e) => e !== '*' && !(EVENT_TYPES as readonly string[]).includes(e));
  if (unknown.length)
    throw invalidRequest(`Invalid enabled_events: ${unknown.join(', ')}; this server emits ${EVENT_TYPES.join(', ')}`, {
      param: 'enabled_events',
    });
  return ({ store }) => ({ status: 200, body: store.events.addEndpoint(url, enabled) });
};

const listWebhookEndpoints: Endpoint = (params) => {
  rejectUnknown(params, ['limit', 'expand']);
  return ({ store }) => {
    const data = store.events.endpoints().map(({ secret: _secret, ...e }) => e);
    return { status: 200, body: { object: 'list', data, has_more: false, url: '/v1/webhook_endpoints' } };
  };
};

const deleteWebhookEndpoint: Endpoint = (params, [id]) => {
  rejectUnknown(params, []);
  return ({ store }) => {
    if (!store.events.deleteEndpoint(id!)) throw resourceMissing('webhook_endpoint', id!, 'id');
    return { status: 200, body: { id, object: 'webhook_endpoint', deleted: true } };
  };
};

const retrieveEvent: Endpoint = (params, [id]) => {
  rejectUnknown(params, ['expand']);
  return ({ store }) => {
    const event = store.events.event(id!);
    if (!event) throw resourceMissing('event', id!, 'id');
    return { status: 200, body: event };
  };
};

export const routes: Route[] = [
  { method: 'POST', path: /^\/v1\/payment_intents$/, endpoint: createPaymentIntent },
  { method: 'GET', path: /^\/v1\/payment_intents\/search$/, endpoint: searchPaymentIntents },
  { method: 'GET', path: /^\/v1\/payment_intents\/([^/]+)$/, endpoint: retrievePaymentIntent },
  { method: 'POST', path: /^\/v1\/refunds$/, endpoint: createRefund },
  { method: 'GET', path: /^\/v1\/refunds$/, endpoint: listRefunds },
  { method: 'GET', path: /^\/v1\/refunds\/([^/]+)$/, endpoint: retrieveRefund },
  { method: 'POST', path: /^\/v1\/webhook_endpoints$/, endpoint: createWebhookEndpoint },
  { method: 'GET', path: /^\/v1\/webhook_endpoints$/, endpoint: listWebhookEndpoints },
  { method: 'DELETE', path: /^\/v1\/webhook_endpoints\/([^/]+)$/, endpoint: deleteWebhookEndpoint },
  { method: 'GET', path: /^\/v1\/events\/([^/]+)$/, endpoint: retrieveEvent },
];
