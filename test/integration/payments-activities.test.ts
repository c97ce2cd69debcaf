import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Stripe from 'stripe';
import { createPaymentActivities, createStripeClient, type CreateRefundInput } from '../../src/activities/payments';
import { FailureType } from '../../src/reliability/failures';
import { startStripeServer, type StripeHook, type StripeServer } from '../../src/servers/stripe-server';
import type { LedgerEffect } from '../../src/servers/stripe/store';
import { activityEnv, failureOf } from '../helpers/activity-env';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'payments-'));
const KEY = 'sk_test_local';
const { run } = activityEnv();
let server: StripeServer;
let stripe: Stripe;
let activities: ReturnType<typeof createPaymentActivities>;

// Seams used through the server's hook: hold a keyed request in flight, or show a refund as pending.
let releaseHeld: (() => void) | undefined;
let heldEntered: (() => void) | undefined;
const beforeEffect: StripeHook = async ({ method, path: urlPath, idempotencyKey }) => {
  if (idempotencyKey === 'held-key' && heldEntered) {
    heldEntered();
    await new Promise<void>((resolve) => (releaseHeld = resolve));
  }
  if (method === 'GET' && urlPath === '/v1/refunds/re_pending') {
    return { status: 200, body: { id: 're_pending', object: 'refund', amount: 1, currency: 'usd', status: 'pending', created: 1, payment_intent: 'pi_x' } };
  }
};

async function paidIntent(amount: number, paymentMethod = 'pm_card_visa'): Promise<string> {
  const pi = await stripe.paymentIntents.create({
    amount,
    currency: 'usd',
    payment_method: paymentMethod,
    confirm: true,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
  });
  return pi.id;
}

function refundInput(paymentIntentId: string, overrides: Partial<CreateRefundInput> = {}): CreateRefundInput {
  return {
    orderId: 'ord_1',
    operationId: 'op_1',
    paymentIntentId,
    amount: 400,
    currency: 'usd',
    reason: 'requested_by_customer',
    idempotencyKey: `refund:${paymentIntentId}:v1`,
    ...overrides,
  };
}

async function refundEffects(paymentIntentId: string): Promise<LedgerEffect[]> {
  const res = await fetch(`${server.url}/_ledger?payment_intent=${paymentIntentId}`);
  return ((await res.json()) as { effects: LedgerEffect[] }).effects.filter((e) => e.type === 'refund.created');
}

beforeAll(async () => {
  server = await startStripeServer({ port: 0, dbPath: path.join(dir, 'stripe.db'), hooks: { beforeEffect } });
  stripe = createStripeClient({ secretKey: KEY, apiBase: server.url });
  activities = createPaymentActivities(stripe);
});

afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('creates one refund for two calls with the same key, the second answered as a replay', async () => {
  const pi = await paidIntent(1000);
  const first = await run(activities.createRefund, refundInput(pi));
  const second = await run(activities.createRefund, refundInput(pi));
  expect(first).toMatchObject({ paymentIntentId: pi, amount: 400, currency: 'usd', status: 'succeeded', replayed: false });
  expect(first.refundId).toMatch(/^re_/);
  expect(second).toEqual({ ...first, replayed: true });
  expect(await refundEffects(pi)).toEqual([
    expect.objectContaining({ objectId: first.refundId, idempotencyKey: `refund:${pi}:v1`, requestsWithKey: 2 }),
  ]);
  const stored = await stripe.refunds.retrieve(first.refundId);
  expect(stored.metadata).toEqual({ order_id: 'ord_1', operation_id: 'op_1' });
  expect(stored.reason).toBe('requested_by_customer');
});

it('fails an over-refund as a non-retryable PAYMENT_REJECTED with Stripe code', async () => {
  const pi = await paidIntent(300);
  const failure = await failureOf(run(activities.createRefund, refundInput(pi, { amount: 301 })));
  expect(failure).toMatchObject({ type: FailureType.PaymentRejected, nonRetryable: true });
  expect(failure.details?.[0]).toMatchObject({ code: 'amount_too_large', statusCode: 400 });
  expect(await refundEffects(pi)).toEqual([]);
});

it('fails a changed request under a used key as a non-retryable IDEMPOTENCY_KEY_REUSED', async () => {
  const pi = await paidIntent(1000);
  await run(activities.createRefund, refundInput(pi));
  const failure = await failureOf(run(activities.createRefund, refundInput(pi, { amount: 500 })));
  expect(failure).toMatchObject({ type: FailureType.IdempotencyKeyReused, nonRetryable: true });
});

it('fails a call racing one in flight with the same key as a retryable IDEMPOTENCY_KEY_IN_FLIGHT', async () => {
  const pi = await paidIntent(1000);
  const input = refundInput(pi, { idempotencyKey: 'held-key' });
  const entered = new Promise<void>((resolve) => (heldEntered = resolve));
  const first = run(activities.createRefund, input);
  await entered;
  heldEntered = undefined;
  const failure = await failureOf(run(activities.createRefund, input));
  expect(failure).toMatchObject({ type: FailureType.IdempotencyKeyInFlight, nonRetryable: false });
  releaseHeld?.();
  expect(await first).toMatchObject({ replayed: false });
  expect(await run(activities.createRefund, input)).toMatchObject({ replayed: true });
});

it('refuses a refund whose currency differs from the order, naming the refund that now exists', async () => {
  const pi = await paidIntent(1000);
  const failure = await failureOf(run(activities.createRefund, refundInput(pi, { currency: 'eur' })));
  expect(failure).toMatchObject({ type: FailureType.InvalidInput, nonRetryable: true });
  expect(failure.details?.[0]).toMatchObject({ refundCurrency: 'usd', orderCurrency: 'eur' });
});

it('verifies a succeeded refund', async () => {
  const pi = await paidIntent(1000);
  const created = await run(activities.createRefund, refundInput(pi));
  expect(await run(activities.verifyRefund, { refundId: created.refundId })).toEqual({ ...created, replayed: false });
});

it('fails verification of a refund on the refundFail card as a non-retryable REFUND_FAILED', async () => {
  const pi = await paidIntent(1000, 'pm_card_refundFail');
  const created = await run(activities.createRefund, refundInput(pi));
  expect(created.status).toBe('succeeded');
  const failure = await failureOf(run(activities.verifyRefund, { refundId: created.refundId }));
  expect(failure).toMatchObject({ type: FailureType.RefundFailed, nonRetryable: true });
  expect(failure.message).toContain('expired_or_canceled_card');
  expect(failure.details?.[0]).toMatchObject({ refundId: created.refundId, status: 'failed', failureReason: 'expired_or_canceled_card' });
});

it('asks for another look at a pending refund with a retryable REFUND_PENDING', async () => {
  const failure = await failureOf(run(activities.verifyRefund, { refundId: 're_pending' }));
  expect(failure).toMatchObject({ type: FailureType.RefundPending, nonRetryable: false });
});

it('fails a wrong API key as a non-retryable PERMISSION_DENIED', async () => {
  const wrong = createPaymentActivities(createStripeClient({ secretKey: 'sk_live_not_here', apiBase: server.url }));
  const failure = await failureOf(run(wrong.verifyRefund, { refundId: 're_x' }));
  expect(failure).toMatchObject({ type: FailureType.PermissionDenied, nonRetryable: true });
});

it('fails as a retryable DEPENDENCY_UNAVAILABLE when the server is down', async () => {
  const gone = await startStripeServer({ port: 0, dbPath: ':memory:' });
  await gone.close();
  const down = createPaymentActivities(createStripeClient({ secretKey: KEY, apiBase: gone.url }));
  const failure = await failureOf(run(down.createRefund, refundInput('pi_x')));
  expect(failure).toMatchObject({ type: FailureType.DependencyUnavailable, nonRetryable: false });
  expect(failure.details?.[0]).toMatchObject({ errorType: 'StripeConnectionError' });
});
