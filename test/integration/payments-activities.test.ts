// The payment activities against the real local Stripe server (with its fault API) and a real
// SQLite operation log: every request they send is counted by the server itself.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Stripe from 'stripe';
import { createAttemptRunner } from '../../src/activities/attempt';
import { refundCreation, type CreateRefundInput, type PaymentDeps } from '../../src/activities/create-refund';
import { refundReconciliation } from '../../src/activities/reconcile-refund';
import { SEND_CLOCK_MARGIN_MS } from '../../src/activities/request-deadline';
import { createStripeClient, stripeIn } from '../../src/activities/stripe-client';
import type { ProviderWindows } from '../../src/contract';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import type { StripeFaultInput } from '../../tools/src/servers/stripe/faults';
import type { LedgerEffect, RequestRow } from '../../tools/src/servers/stripe/store';
import { startStripeServer, type StripeServer } from '../../tools/src/servers/stripe-server';
import { openStore } from '../../src/store';
import type { OrderStore } from '../../src/store';
import { activityEnv, detailsOf, failureOf } from '../helpers/activity-env';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'payments-'));
const KEY = 'sk_test_local';
const { run } = activityEnv();
let server: StripeServer;
let stripe: Stripe;
let store: OrderStore;
const windows: ProviderWindows = { dedupeWindowMs: 24 * 3600_000, consistencyMs: 300, requestTimeoutMs: 1000 };

const paymentActivities = (deps: PaymentDeps) => ({ ...refundCreation(deps), ...refundReconciliation(deps) });

function activities(overrides: { stripe?: Stripe; windows?: Partial<ProviderWindows> } = {}) {
  const attempt = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
  return paymentActivities({
    stripe: (a) => stripeIn(overrides.stripe ?? stripe, a),
    log: store.operations,
    attempt,
    windows: { ...windows, ...overrides.windows },
  });
}

let seq = 0;
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

/** A refund input whose intent is committed, as beginOperation would have done. */
async function intended(
  paymentIntentId: string,
  overrides: Partial<CreateRefundInput> = {},
): Promise<CreateRefundInput> {
  seq += 1;
  const operationId = overrides.operationId ?? `refund:test:ord_${seq}:v1`;
  const input: CreateRefundInput = {
    orderId: `ord_${seq}`,
    operationId,
    paymentIntentId,
    amount: 400,
    currency: 'usd',
    reason: 'requested_by_customer',
    idempotencyKey: `${operationId}:create_refund`,
    ...overrides,
  };
  await store.operations.commitIntent({
    operationId,
    orderId: input.orderId,
    operationVersion: 1,
    scope: 'test',
    requestHash: `hash-${operationId}`,
    request: { orderId: input.orderId, amount: input.amount, currency: input.currency, reason: input.reason },
    actor: 'test',
  });
  return input;
}

const reconcileInput = (input: CreateRefundInput) => ({
  operationId: input.operationId,
  paymentIntentId: input.paymentIntentId,
  amount: input.amount,
  currency: input.currency,
  idempotencyKey: input.idempotencyKey,
});

async function refundEffects(paymentIntentId: string): Promise<LedgerEffect[]> {
  const res = await fetch(`${server.url}/_ledger?payment_intent=${paymentIntentId}`);
  return ((await res.json()) as { effects: LedgerEffect[] }).effects.filter((e) => e.type === 'refund.created');
}

async function requestsWith(key: string): Promise<RequestRow[]> {
  const res = await fetch(`${server.url}/_requests?idempotency_key=${encodeURIComponent(key)}`);
  return ((await res.json()) as { requests: RequestRow[] }).requests;
}

async function fault(spec: StripeFaultInput): Promise<void> {
  const res = await fetch(`${server.url}/_faults`, { method: 'POST', body: JSON.stringify(spec) });
  expect(res.status).toBe(200);
}

beforeAll(async () => {
  server = await startStripeServer({ port: 0, dbPath: path.join(dir, 'stripe.db'), faults: true });
  stripe = createStripeClient({ secretKey: KEY, apiBase: server.url, requestTimeoutMs: windows.requestTimeoutMs });
  store = await openStore(`sqlite:${path.join(dir, 'orders.db')}`);
});

afterAll(async () => {
  await store.close();
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('createRefund', () => {
  it('sends one keyed request naming the operation, records the receipt, and replays it without a second request', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    const first = await run(activities().createRefund, input);
    expect(first).toMatchObject({
      paymentIntentId: pi,
      amount: 400,
      status: 'succeeded',
      operationId: input.operationId,
      replayed: false,
    });
    expect(first.evidence).toMatchObject({ attempt: 1, ledger: [{ attempt: 1, outcome: 'ok', transportRequests: 1 }] });
    await expect(store.operations.get(input.operationId)).resolves.toMatchObject({
      status: 'refunded',
      refund: { refundId: first.refundId },
      requestsSent: 1,
    });

    const again = await run(activities().createRefund, input);
    expect(again).toMatchObject({ refundId: first.refundId, replayed: true });
    expect(await requestsWith(input.idempotencyKey)).toHaveLength(1);
    expect(await refundEffects(pi)).toHaveLength(1);
    expect((await stripe.refunds.retrieve(first.refundId)).metadata).toEqual({
      order_id: input.orderId,
      operation_id: input.operationId,
    });
  });

  it('sends nothing for an operation whose intent was never committed', async () => {
    const pi = await paidIntent(1000);
    const failure = await failureOf(
      run(activities().createRefund, { ...(await intended(pi)), operationId: 'refund:test:nobody:v1' }),
    );
    expect(failure).toMatchObject({ type: 'INVALID_ARGUMENTS', nonRetryable: true });
    expect(await refundEffects(pi)).toHaveLength(0);
  });

  it('is refused by Stripe for more than is refundable: PERMANENT_BUSINESS, not executed, with the request id', async () => {
    const pi = await paidIntent(300);
    const failure = await failureOf(run(activities().createRefund, await intended(pi, { amount: 301 })));
    expect(failure).toMatchObject({ type: 'PERMANENT_BUSINESS', nonRetryable: true });
    expect(detailsOf(failure)).toMatchObject({
      certainty: 'not_executed',
      reason: 'amount_too_large',
      providerRequestId: expect.stringMatching(/^req_/),
      provider: { statusCode: 400 },
    });
    expect(await refundEffects(pi)).toEqual([]);
  });

  it('sends exactly one request when the connection is cut after sending: the SDK does not resend, and the outcome is unknown', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'fail_before_commit', match: { idempotencyKey: input.idempotencyKey } });
    const failure = await failureOf(run(activities().createRefund, input));
    expect(failure).toMatchObject({ type: 'UNKNOWN_OUTCOME', nonRetryable: true });
    expect(detailsOf(failure)).toMatchObject({
      certainty: 'may_have_executed',
      reason: 'response_lost',
      operationId: input.operationId,
    });
    expect(detailsOf(failure).ledger).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'UNKNOWN_OUTCOME', transportRequests: 1 }),
    ]);
    // stripe-node resends once after ECONNRESET even with maxNetworkRetries 0; our transport gives it no reason to.
    expect(await requestsWith(input.idempotencyKey)).toEqual([
      expect.objectContaining({ status: null, fault: 'fail_before_commit' }),
    ]);
    await expect(store.operations.get(input.operationId)).resolves.toMatchObject({
      status: 'unknown',
      requestsSent: 1,
    });
  });

  it('reports a request that outlives its timeout as an unknown outcome, though the refund was made', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'stall', match: { idempotencyKey: input.idempotencyKey }, delayMs: 3000 });
    const failure = await failureOf(run(activities().createRefund, input));
    expect(detailsOf(failure)).toMatchObject({
      code: 'UNKNOWN_OUTCOME',
      certainty: 'may_have_executed',
      reason: 'client_timeout',
    });
    expect(await refundEffects(pi)).toHaveLength(1);
  });

  it('retries a 429 no sooner than Retry-After asks, and a connection refused before sending as not executed', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'rate_limit', match: { idempotencyKey: input.idempotencyKey }, retryAfterSeconds: 2 });
    const limited = await failureOf(run(activities().createRefund, input));
    expect(limited).toMatchObject({ type: 'RATE_LIMIT', nonRetryable: false });
    expect(limited.nextRetryDelay).toBeGreaterThanOrEqual(2000);
    expect(detailsOf(limited)).toMatchObject({ certainty: 'not_executed', retryAfterMs: 2000 });

    const gone = await startStripeServer({ port: 0, dbPath: ':memory:' });
    await gone.close();
    const down = activities({ stripe: createStripeClient({ secretKey: KEY, apiBase: gone.url }) });
    const refused = await failureOf(run(down.createRefund, input));
    expect(refused).toMatchObject({ type: 'TRANSIENT_DEPENDENCY', nonRetryable: false });
    expect(detailsOf(refused)).toMatchObject({ certainty: 'not_executed', reason: 'connection_failed_before_send' });
    // Nothing reached a server, so no transport request is counted against the budget.
    expect(detailsOf(refused).ledger.at(-1)).toMatchObject({ outcome: 'TRANSIENT_DEPENDENCY', transportRequests: 0 });
  });

  it('counts a send proven to have made no refund only when Stripe itself refused it below 500, or it never left: a 503 proves nothing', async () => {
    const pi = await paidIntent(1000);
    const limited = await intended(pi);
    await fault({ kind: 'rate_limit', match: { idempotencyKey: limited.idempotencyKey }, retryAfterSeconds: 0 });
    expect(detailsOf(await failureOf(run(activities().createRefund, limited)))).toMatchObject({
      certainty: 'not_executed',
      providerRequestId: expect.any(String),
    });
    await expect(store.operations.get(limited.operationId)).resolves.toMatchObject({
      requestsSent: 1,
      provenAbsentThrough: 1,
    });

    // A 503 may come from a proxy in front of Stripe that had already forwarded the request: the send stays open.
    const unavailable = await intended(await paidIntent(1000));
    await fault({ kind: 'server_error', status: 503, match: { idempotencyKey: unavailable.idempotencyKey } });
    expect(detailsOf(await failureOf(run(activities().createRefund, unavailable)))).toMatchObject({
      certainty: 'not_executed',
      reason: 'provider_unavailable',
    });
    await expect(store.operations.get(unavailable.operationId)).resolves.toMatchObject({
      requestsSent: 1,
      provenAbsentThrough: null,
    });
  });

  it("cuts each request's timeout to what is left of the attempt, so an attempt never outlives its start-to-close", async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'stall', match: { idempotencyKey: input.idempotencyKey }, delayMs: 3000 });
    const patient = activities({
      stripe: createStripeClient({ secretKey: KEY, apiBase: server.url, requestTimeoutMs: 10_000 }),
      windows: { requestTimeoutMs: 10_000 },
    });
    const short = activityEnv({ startToCloseTimeoutMs: 2500 });
    const started = Date.now();
    const failure = await failureOf(short.run(patient.createRefund, input));
    expect(detailsOf(failure)).toMatchObject({ code: 'UNKNOWN_OUTCOME', reason: 'client_timeout' });
    expect(Date.now() - started).toBeLessThan(2500);

    // With too little of the attempt left for a request to finish, nothing is sent at all.
    const other = await intended(pi);
    const tooShort = activityEnv({ startToCloseTimeoutMs: 1500 });
    const refused = await failureOf(tooShort.run(patient.createRefund, other));
    expect(detailsOf(refused)).toMatchObject({
      code: 'TRANSIENT_DEPENDENCY',
      certainty: 'not_executed',
      reason: 'attempt_time_spent',
    });
    expect(await requestsWith(other.idempotencyKey)).toHaveLength(0);
    await expect(store.operations.get(other.operationId)).resolves.toMatchObject({ requestsSent: 0 });
  });

  it('stops with BUDGET_EXCEEDED when Retry-After is longer than the step has left', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'rate_limit', match: { idempotencyKey: input.idempotencyKey }, retryAfterSeconds: 120 });
    const short = activityEnv({ scheduledTimestampMs: Date.now(), scheduleToCloseTimeoutMs: 30_000 });
    const failure = await failureOf(short.run(activities().createRefund, input));
    expect(failure).toMatchObject({ type: 'BUDGET_EXCEEDED', nonRetryable: true });
    expect(failure.message).toMatch(/as Retry-After asks/);
  });

  it('gives up retrying when the policy says the last attempt was the last', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'server_error', status: 502, match: { idempotencyKey: input.idempotencyKey } });
    const last = activityEnv({ attempt: 5 });
    const failure = await failureOf(last.run(activities().createRefund, input));
    expect(failure).toMatchObject({ type: 'TRANSIENT_DEPENDENCY', nonRetryable: true });
  });

  it('refuses to resend outside the dedupe window until reconciliation proves no refund exists', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'fail_before_commit', match: { idempotencyKey: input.idempotencyKey } });
    const narrow = activities({ windows: { dedupeWindowMs: 1 } });
    await failureOf(run(narrow.createRefund, input));

    const refused = await failureOf(run(narrow.createRefund, input));
    expect(detailsOf(refused)).toMatchObject({ code: 'UNKNOWN_OUTCOME', reason: 'outside_dedupe_window' });
    expect(await requestsWith(input.idempotencyKey)).toHaveLength(1);

    await new Promise((r) => setTimeout(r, windows.requestTimeoutMs + SEND_CLOCK_MARGIN_MS + windows.consistencyMs));
    await expect(run(narrow.reconcileRefund, reconcileInput(input))).resolves.toMatchObject({
      result: 'not_started_confirmed',
    });
    await expect(run(narrow.createRefund, input)).resolves.toMatchObject({ replayed: false });
    expect(await refundEffects(pi)).toHaveLength(1);
  });
  it('keeps a store failure after a refund was made apart from "not executed": the refund exists', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    const log = store.operations;
    const failingSettle = new Proxy(log, {
      get: (target, prop) =>
        prop === 'settle'
          ? async () => Promise.reject(Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }))
          : Reflect.get(target, prop).bind(target),
    });
    const attempt = createAttemptRunner({ policy: DEFAULT_POLICY, log });
    const flaky = paymentActivities({ stripe: (a) => stripeIn(stripe, a), log: failingSettle, attempt, windows });
    const failure = await failureOf(run(flaky.createRefund, input));
    expect(failure).toMatchObject({ type: 'CAPACITY', nonRetryable: false });
    expect(detailsOf(failure)).toMatchObject({
      certainty: 'completed',
      reason: 'receipt_not_recorded',
      provider: { refundId: expect.stringMatching(/^re_/) },
    });
    // The retry, with the same key inside the window, recovers the receipt without a second refund.
    await expect(run(activities().createRefund, input)).resolves.toMatchObject({ replayed: true });
    expect(await refundEffects(pi)).toHaveLength(1);
  });
});

it('never sends a request whose stamped time has passed (a worker that stalled between the stamp and the send)', async () => {
  const pi = await paidIntent(1000);
  const attempt = {
    actor: 'test',
    startedAtMs: Date.now(),
    requests: 0,
    providerRequestId: null,
    sendBy: Date.now() - 1,
  };
  const err = await stripeIn(stripe, attempt)
    .refunds.create({ payment_intent: pi, amount: 100 }, { idempotencyKey: `late-${pi}` })
    .catch((e: unknown) => e);
  expect(err).toMatchObject({ type: 'StripeConnectionError', detail: { stage: 'not_sent' } });
  expect(attempt.requests).toBe(0);
  expect(await requestsWith(`late-${pi}`)).toHaveLength(0);
});

describe('reconcileRefund', () => {
  it('finds a refund whose answer was lost by listing the payment intent for its operation id', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'drop_after_commit', match: { idempotencyKey: input.idempotencyKey } });
    await failureOf(run(activities().createRefund, input));
    const result = await run(activities().reconcileRefund, reconcileInput(input));
    expect(result).toMatchObject({
      result: 'completed',
      method: 'list',
      matches: 1,
      refund: { operationId: input.operationId, amount: 400 },
    });
    await expect(store.operations.get(input.operationId)).resolves.toMatchObject({ status: 'refunded' });
    // Known now: the next look is by id.
    await expect(run(activities().reconcileRefund, reconcileInput(input))).resolves.toMatchObject({
      result: 'completed',
      method: 'retrieve',
    });
  });

  it('calls a not-found inconclusive while the list may lag, and conclusive after the consistency window', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'fail_before_commit', match: { idempotencyKey: input.idempotencyKey } });
    await failureOf(run(activities().createRefund, input));
    const early = await run(activities().reconcileRefund, reconcileInput(input));
    expect(early).toMatchObject({
      result: 'not_found_inconclusive',
      insideDedupeWindow: true,
      conclusiveAt: expect.any(String),
    });
    await new Promise((r) => setTimeout(r, Date.parse(early.conclusiveAt!) - Date.now() + 50));
    await expect(run(activities().reconcileRefund, reconcileInput(input))).resolves.toMatchObject({
      result: 'not_started_confirmed',
    });
    const op = await store.operations.get(input.operationId);
    expect(op).toMatchObject({ status: 'intent', absenceConfirmedAt: expect.any(String) });
  });

  it("waits out the sender's own request timeout, not the checking worker's (a rollout that raised STRIPE_TIMEOUT_MS)", async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'fail_before_commit', match: { idempotencyKey: input.idempotencyKey } });
    const longTimeoutMs = 5000;
    const sender = activities({
      stripe: createStripeClient({ secretKey: KEY, apiBase: server.url, requestTimeoutMs: longTimeoutMs }),
      windows: { requestTimeoutMs: longTimeoutMs },
    });
    await failureOf(run(sender.createRefund, input));
    const stampedAt = Date.parse((await store.operations.get(input.operationId))!.lastSentAt!);

    // Past the checker's own bound (its 1 s timeout), well inside the sender's: that request may still be out.
    await new Promise((r) =>
      setTimeout(
        r,
        stampedAt + windows.requestTimeoutMs + SEND_CLOCK_MARGIN_MS + windows.consistencyMs + 200 - Date.now(),
      ),
    );
    const early = await run(activities().reconcileRefund, reconcileInput(input));
    expect(early).toMatchObject({ result: 'not_found_inconclusive' });
    expect(Date.parse(early.conclusiveAt!)).toBe(
      stampedAt + longTimeoutMs + SEND_CLOCK_MARGIN_MS + windows.consistencyMs,
    );
    await expect(store.operations.get(input.operationId)).resolves.toMatchObject({ provenAbsentThrough: null });
  });

  it('does not mistake a lagging list for absence', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'drop_after_commit', match: { idempotencyKey: input.idempotencyKey } });
    await fault({ kind: 'lagging_list', match: { idempotencyKey: input.idempotencyKey }, lagMs: 1500 });
    await failureOf(run(activities().createRefund, input));
    await expect(run(activities().reconcileRefund, reconcileInput(input))).resolves.toMatchObject({
      result: 'not_found_inconclusive',
    });
    await new Promise((r) => setTimeout(r, 1600));
    await expect(run(activities().reconcileRefund, reconcileInput(input))).resolves.toMatchObject({
      result: 'completed',
    });
  });

  it('reports a refund for less than asked as partial, and a refund the provider failed as failed', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'partial', match: { idempotencyKey: input.idempotencyKey } });
    await failureOf(run(activities().createRefund, input));
    await expect(run(activities().reconcileRefund, reconcileInput(input))).resolves.toMatchObject({
      result: 'partial',
      refund: { amount: 200 },
    });

    const failing = await paidIntent(1000, 'pm_card_refundFail');
    const lost = await intended(failing);
    await fault({ kind: 'drop_after_commit', match: { idempotencyKey: lost.idempotencyKey } });
    await failureOf(run(activities().createRefund, lost));
    await expect(run(activities().reconcileRefund, reconcileInput(lost))).resolves.toMatchObject({
      result: 'failed',
      refund: { status: 'failed' },
    });
    await expect(store.operations.get(lost.operationId)).resolves.toMatchObject({ status: 'failed' });
  });

  it('fails as a retryable read when the provider is down: a lookup that says nothing is not an answer', async () => {
    const pi = await paidIntent(1000);
    const input = await intended(pi);
    await fault({ kind: 'server_error', status: 500, match: { method: 'GET', paymentIntent: pi } });
    const failure = await failureOf(run(activities().reconcileRefund, reconcileInput(input)));
    expect(failure).toMatchObject({ type: 'TRANSIENT_DEPENDENCY', nonRetryable: false });
    expect(detailsOf(failure)).toMatchObject({ certainty: 'not_executed' });
  });
});
