// Payment activities: refunds through the official Stripe SDK, with Stripe's errors mapped onto
// our closed failure types so the workflow's retry policy is the only retry owner.
import { ApplicationFailure } from '@temporalio/common';
import Stripe from 'stripe';
import { FailureType } from '../reliability/failures';
import type { REFUND_REASONS, RefundReceipt } from '../shared';

const REQUEST_TIMEOUT_MS = 20_000;

export function createStripeClient(cfg: { secretKey: string; apiBase?: string }): Stripe {
  return new Stripe(cfg.secretKey, {
    // Temporal's activity retry policy owns retries; the SDK retrying too would multiply attempts.
    maxNetworkRetries: 0,
    timeout: REQUEST_TIMEOUT_MS,
    ...(cfg.apiBase !== undefined && apiBaseConfig(cfg.apiBase)),
  });
}

function apiBaseConfig(apiBase: string): Pick<Stripe.StripeConfig, 'host' | 'port' | 'protocol'> {
  const url = new URL(apiBase);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`apiBase must be http(s): ${apiBase}`);
  // The SDK always requests /v1/...; a base with a path would silently be ignored.
  if (url.pathname !== '/' || url.search !== '') throw new Error(`apiBase must not have a path or query: ${apiBase}`);
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (protocol === 'https' ? 443 : 80) : Number(url.port),
    protocol,
  };
}

export interface CreateRefundInput {
  orderId: string;
  operationId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
  reason: (typeof REFUND_REASONS)[number];
  /** Derived deterministically in workflow code, so every attempt of this operation sends the same key. */
  idempotencyKey: string;
}

export interface VerifyRefundInput {
  refundId: string;
}

export function createPaymentActivities(stripe: Stripe) {
  async function createRefund(input: CreateRefundInput): Promise<RefundReceipt> {
    let refund: Stripe.Response<Stripe.Refund>;
    try {
      refund = await stripe.refunds.create(
        {
          payment_intent: input.paymentIntentId,
          amount: input.amount,
          reason: input.reason,
          metadata: { order_id: input.orderId, operation_id: input.operationId },
        },
        { idempotencyKey: input.idempotencyKey },
      );
    } catch (err) {
      throw stripeErrorToFailure(err) ?? err;
    }
    if (refund.currency !== input.currency) {
      // The refund exists by now; say so, so nobody retries it under a new key.
      throw ApplicationFailure.create({
        type: FailureType.InvalidInput,
        nonRetryable: true,
        message: `refund ${refund.id} was created in ${refund.currency}, but the order is in ${input.currency}`,
        details: [{ refundId: refund.id, refundCurrency: refund.currency, orderCurrency: input.currency }],
      });
    }
    return toReceipt(refund, input.paymentIntentId, refund.lastResponse.headers['idempotent-replayed'] === 'true');
  }

  async function verifyRefund(input: VerifyRefundInput): Promise<RefundReceipt> {
    let refund: Stripe.Response<Stripe.Refund>;
    try {
      refund = await stripe.refunds.retrieve(input.refundId);
    } catch (err) {
      throw stripeErrorToFailure(err) ?? err;
    }
    const details = { refundId: refund.id, status: refund.status, failureReason: refund.failure_reason ?? null };
    switch (refund.status) {
      case 'succeeded':
        return toReceipt(refund, undefined, false);
      case 'failed':
      case 'canceled':
        throw ApplicationFailure.create({
          type: FailureType.RefundFailed,
          nonRetryable: true,
          message: `refund ${refund.id} ${refund.status}: ${refund.failure_reason ?? 'no reason given'}`,
          details: [details],
        });
      default:
        // pending, requires_action, or a status this code does not know yet: look again later.
        throw ApplicationFailure.create({
          type: FailureType.RefundPending,
          nonRetryable: false,
          message: `refund ${refund.id} is ${refund.status ?? 'without a status'}`,
          details: [details],
        });
    }
  }

  return { createRefund, verifyRefund };
}

export type PaymentActivities = ReturnType<typeof createPaymentActivities>;

function toReceipt(refund: Stripe.Refund, fallbackPaymentIntentId: string | undefined, replayed: boolean): RefundReceipt {
  const pi = refund.payment_intent;
  return {
    refundId: refund.id,
    paymentIntentId: (typeof pi === 'string' ? pi : pi?.id) ?? fallbackPaymentIntentId ?? '',
    amount: refund.amount,
    currency: refund.currency,
    status: refund.status ?? 'unknown',
    created: refund.created,
    replayed,
  };
}

interface StripeErrorLike {
  type: string;
  rawType?: string;
  message: string;
  statusCode?: number;
  code?: string;
  param?: string;
  requestId?: string;
  headers?: Record<string, string>;
}

function isStripeError(err: unknown): err is StripeErrorLike & Error {
  return err instanceof Stripe.errors.StripeError;
}

/**
 * Maps an error thrown by the Stripe SDK to an ApplicationFailure of our closed types; returns
 * undefined for anything else (a bug), which the caller rethrows unchanged.
 */
export function stripeErrorToFailure(err: unknown, nowMs: number = Date.now()): ApplicationFailure | undefined {
  if (!isStripeError(err)) return undefined;
  const status = err.statusCode;
  const headers = err.headers ?? {};
  const details = {
    provider: 'stripe',
    errorType: err.type,
    rawType: err.rawType ?? null,
    statusCode: status ?? null,
    code: err.code ?? null,
    param: err.param ?? null,
    requestId: err.requestId ?? null,
    stripeShouldRetry: headers['stripe-should-retry'] ?? null,
  };
  const fail = (type: FailureType, nonRetryable: boolean, extra: { nextRetryDelay?: number } = {}) =>
    ApplicationFailure.create({ type, nonRetryable, message: `Stripe: ${err.message}`, details: [details], cause: err, ...extra });

  if (err.type === 'StripeConnectionError') return fail(FailureType.DependencyUnavailable, false);
  // The SDK reports Stripe's in-flight 409 as a plain StripeAPIError; the raw type tells them apart.
  if (status === 409) {
    return err.rawType === 'idempotency_error'
      ? fail(FailureType.IdempotencyKeyInFlight, false)
      : fail(FailureType.DependencyUnavailable, false);
  }
  if (err.rawType === 'idempotency_error') return fail(FailureType.IdempotencyKeyReused, true);
  if (status === 401 || status === 403) return fail(FailureType.PermissionDenied, true);
  if (status === 429 || err.type === 'StripeRateLimitError') {
    const delay = retryAfterMs(headers['retry-after'], nowMs);
    return fail(FailureType.RateLimited, false, delay === undefined ? {} : { nextRetryDelay: delay });
  }
  if (status !== undefined && status >= 500) {
    // Stripe stores a 5xx against the key and says when resending it would only replay that answer.
    return fail(FailureType.DependencyUnavailable, headers['stripe-should-retry'] === 'false');
  }
  if (err.type === 'StripeInvalidRequestError' || err.type === 'StripeCardError') return fail(FailureType.PaymentRejected, true);
  return fail(FailureType.DependencyUnavailable, false);
}

/** Retry-After is either delay-seconds or an HTTP date. */
function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const ms = /^\d+(\.\d+)?$/.test(value.trim()) ? Math.ceil(Number(value) * 1000) : Date.parse(value) - nowMs;
  // A past date or zero means "now": leave the delay to the retry policy.
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}
