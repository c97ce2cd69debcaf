// The circuit breaker in front of Stripe refunds, against the real local Stripe server behind
// Toxiproxy: an outage opens it, an open breaker fails new refunds fast without sending, a
// reconciliation still reaches Stripe, a refusal of the request itself never counts, and once the
// provider is back the probe closes it. Every request is counted by the Stripe server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Stripe from 'stripe';
import { Classified, createAttemptRunner, type Attempt } from '../../src/activities/attempt';
import { refundCreation, type CreateRefundInput } from '../../src/activities/create-refund';
import { refundReconciliation } from '../../src/activities/reconcile-refund';
import { createStripeClient, stripeIn } from '../../src/activities/stripe-client';
import { startToxiproxy, type Toxiproxy } from '../../tools/src/chaos/toxiproxy';
import { Breakers, CircuitBreaker } from '../../src/reliability/circuit-breaker';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import type { RequestRow } from '../../tools/src/servers/stripe/store';
import { startStripeServer, type StripeServer } from '../../tools/src/servers/stripe-server';
import { openStore, type OrderStore } from '../../src/store';
import { activityEnv, detailsOf, failureOf } from '../helpers/activity-env';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'breaker-'));
const { run } = activityEnv();
const settings = { enabled: true, failureThreshold: 3, windowMs: 60_000, cooldownMs: 1500, halfOpenProbes: 1 };
let server: StripeServer;
let toxiproxy: Toxiproxy;
let direct: Stripe;
let store: OrderStore;
let breakers: Breakers;
let activities: ReturnType<typeof refundCreation> & ReturnType<typeof refundReconciliation>;
let seq = 0;

beforeAll(async () => {
  server = await startStripeServer({ port: 0, dbPath: path.join(dir, 'stripe.db') });
  toxiproxy = await startToxiproxy();
  const proxy = await toxiproxy.proxy('stripe', new URL(server.url).host);
  direct = createStripeClient({ secretKey: 'sk_test_local', apiBase: server.url, requestTimeoutMs: 1000 });
  const viaProxy = createStripeClient({
    secretKey: 'sk_test_local',
    apiBase: `http://${proxy.listen}`,
    requestTimeoutMs: 1000,
  });
  store = await openStore(`sqlite:${path.join(dir, 'orders.db')}`);
  breakers = new Breakers(settings);
  const attempt = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations, breakers });
  const deps = {
    stripe: (a: Attempt) => stripeIn(viaProxy, a),
    log: store.operations,
    attempt,
    windows: { dedupeWindowMs: 24 * 3600_000, consistencyMs: 0, requestTimeoutMs: 1000 },
  };
  activities = { ...refundCreation(deps), ...refundReconciliation(deps) };
});

afterAll(async () => {
  await store?.close();
  await toxiproxy?.close();
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function intended(amount = 400): Promise<CreateRefundInput> {
  const pi = await direct.paymentIntents.create({
    amount: 1000,
    currency: 'usd',
    payment_method: 'pm_card_visa',
    confirm: true,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
  });
  const operationId = `refund:test:breaker_${++seq}:v1`;
  const input = {
    orderId: `breaker_${seq}`,
    operationId,
    paymentIntentId: pi.id,
    amount,
    currency: 'usd',
    reason: 'requested_by_customer' as const,
    idempotencyKey: `${operationId}:create_refund`,
  };
  await store.operations.commitIntent({
    operationId,
    orderId: input.orderId,
    operationVersion: 1,
    scope: 'test',
    requestHash: `h-${operationId}`,
    request: { orderId: input.orderId, amount, currency: 'usd', reason: input.reason },
    actor: 'test',
  });
  return input;
}

async function refundRequests(): Promise<RequestRow[]> {
  const res = await fetch(`${server.url}/_requests?path=/v1/refunds`);
  return ((await res.json()) as { requests: RequestRow[] }).requests;
}

const state = () => breakers.get('stripe:create_refund').snapshot().state;

test('refusals of the request itself never open it', async () => {
  // More than was paid: Stripe refuses each with a 400, a verdict on the request, not on Stripe's health.
  for (let i = 0; i < 5; i++) {
    const failure = await failureOf(run(activities.createRefund, await intended(5000)));
    expect(failure).toMatchObject({ type: 'PERMANENT_BUSINESS' });
  }
  expect(state()).toBe('closed');
});

test('an outage opens it; while open, refunds fail fast with CAPACITY and nothing is sent, reconciliation still asks Stripe; recovery closes it', async () => {
  const input = await intended();
  await toxiproxy.setEnabled('stripe', false);
  for (let i = 0; i < settings.failureThreshold; i++) {
    const failure = await failureOf(run(activities.createRefund, input));
    expect(failure).toMatchObject({ type: 'TRANSIENT_DEPENDENCY' });
  }
  expect(state()).toBe('open');

  // Stripe is back, but the breaker does not know yet: it fails fast, sends nothing, and says when to come back.
  await toxiproxy.setEnabled('stripe', true);
  const before = (await refundRequests()).length;
  const started = Date.now();
  const fast = await failureOf(run(activities.createRefund, input));
  expect(Date.now() - started).toBeLessThan(500);
  expect(fast).toMatchObject({
    type: 'CAPACITY',
    nonRetryable: false,
    message: expect.stringMatching(/circuit breaker stripe:create_refund is open .* nothing was sent/),
  });
  expect(detailsOf(fast)).toMatchObject({ reason: 'circuit_open', certainty: 'not_executed' });
  expect(detailsOf(fast).retryAfterMs).toBeGreaterThan(0);
  expect(fast.nextRetryDelay).toBeGreaterThanOrEqual(detailsOf(fast).retryAfterMs!);
  expect(await refundRequests()).toHaveLength(before);

  // Reconciling an effect that may already exist is a read: it never waits on the breaker.
  const looked = await run(activities.reconcileRefund, {
    operationId: input.operationId,
    paymentIntentId: input.paymentIntentId,
    amount: input.amount,
    currency: input.currency,
    idempotencyKey: input.idempotencyKey,
  });
  // (Inconclusive or proven absent depending on how long ago the refused sends were stamped: either way Stripe was asked.)
  expect(looked.result).toMatch(/^not_(found_inconclusive|started_confirmed)$/);
  expect((await refundRequests()).length).toBeGreaterThan(before);

  // After the cooldown one probe goes through; its success closes the breaker, and the refund is made once.
  await new Promise((r) => setTimeout(r, settings.cooldownMs));
  const probe = await run(activities.createRefund, input);
  expect(probe).toMatchObject({ status: 'succeeded', replayed: false });
  expect(state()).toBe('closed');
  const ledger = (await (await fetch(`${server.url}/_ledger?payment_intent=${input.paymentIntentId}`)).json()) as {
    effects: { type: string }[];
  };
  expect(ledger.effects.filter((e) => e.type === 'refund.created')).toHaveLength(1);
});

test('a probe that fails opens it again for another cooldown', () => {
  let now = 0;
  const b = new CircuitBreaker('test', settings, () => now);
  for (let i = 0; i < 3; i++) {
    expect(b.admit()).toBeUndefined();
    b.failed('TRANSIENT_DEPENDENCY', true);
  }
  expect(b.admit()).toMatchObject({ state: 'open', retryAfterMs: 1500 });
  now = 1500;
  expect(b.admit()).toBeUndefined(); // the probe
  // Only one probe at a time; the others wait long enough for it to settle, not a second (their attempts would run out first).
  expect(b.admit()).toMatchObject({ state: 'half_open', retryAfterMs: settings.cooldownMs });
  b.failed('UNKNOWN_OUTCOME', true);
  expect(b.snapshot()).toMatchObject({ state: 'open', opened: 2 });
  now = 2999;
  expect(b.admit()).toMatchObject({ retryAfterMs: 1 });
  now = 3000;
  expect(b.admit()).toBeUndefined();
  b.succeeded();
  expect(b.snapshot()).toMatchObject({ state: 'closed', failures: 0, successes: 0 });
  // Failures far apart never add up to an outage, and a store or pre-send refusal never counts.
  for (let i = 0; i < 5; i++) {
    now += settings.windowMs;
    b.failed('TRANSIENT_DEPENDENCY', true);
    b.failed('CAPACITY', false);
  }
  expect(b.snapshot().state).toBe('closed');
  expect(new CircuitBreaker('off', { ...settings, enabled: false }).admit()).toBeUndefined();
});

test('a burst of concurrent calls whose first answers are fast failures waits for the rest; the same burst in an outage opens it', () => {
  let now = 0;
  const b = new CircuitBreaker('burst', settings, () => now);
  for (let i = 0; i < 10; i++) expect(b.admit()).toBeUndefined();
  // Three 429s and resets come back first, seven calls still out: not yet an outage.
  for (let i = 0; i < 3; i++) b.failed('RATE_LIMIT', true);
  expect(b.snapshot()).toMatchObject({ state: 'closed', failures: 3, inFlight: 7 });
  expect(b.admit()).toBeUndefined();
  for (let i = 0; i < 8; i++) b.succeeded();
  expect(b.snapshot()).toMatchObject({ state: 'closed', failures: 3, successes: 8, inFlight: 0 });

  // A window later, every call of a burst fails: it opens once the failures are half of the calls, those out included.
  now += settings.windowMs;
  for (let i = 0; i < 10; i++) b.admit();
  for (let i = 0; i < 4; i++) b.failed('TRANSIENT_DEPENDENCY', true);
  expect(b.snapshot()).toMatchObject({ state: 'closed', failures: 4, inFlight: 6 });
  b.failed('TRANSIENT_DEPENDENCY', true);
  expect(b.snapshot()).toMatchObject({ state: 'open', inFlight: 5 });
  expect(b.admit()).toMatchObject({ state: 'open' });
});

test('a partial outage under load opens it: nine calls in ten failing, fifty out at a time, the odd success in between', () => {
  let now = 0;
  const b = new CircuitBreaker('partial', { ...settings, failureThreshold: 5 }, () => now);
  for (let i = 0; i < 50; i++) b.admit();
  let settled = 0;
  while (b.snapshot().state === 'closed' && settled < 200) {
    now += 10;
    if (++settled % 10 === 0) b.succeeded();
    else b.failed('TRANSIENT_DEPENDENCY', true);
    b.admit();
  }
  // Failures in a row reset by each success never reached five out of fifty in flight; the failure share does.
  expect(b.snapshot().state).toBe('open');
  expect(settled).toBeLessThan(120);
});

test('a probe that never settles (its worker stuck) is given up after the window, so the breaker cannot stay half-open for good', () => {
  let now = 0;
  const b = new CircuitBreaker('stuck', settings, () => now);
  for (let i = 0; i < 3; i++) b.failed('TRANSIENT_DEPENDENCY', true);
  now = settings.cooldownMs;
  expect(b.admit()).toBeUndefined(); // the probe, which never comes back
  expect(b.admit()).toMatchObject({ state: 'half_open' });
  now += settings.windowMs;
  expect(b.admit()).toBeUndefined();
});

test('an open breaker never calls a step "not executed" when an earlier attempt of it may have taken effect', async () => {
  const strict = new Breakers({ ...settings, failureThreshold: 1 });
  const attempt = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations, breakers: strict });
  const call = {
    step: 'create_refund',
    key: 'refund:test:uncertain:v1:create_refund',
    operationId: 'refund:test:uncertain:v1',
    boundary: 'stripe' as const,
    breaker: 'stripe:create_refund',
  };
  const lost = () => {
    throw new Classified('UNKNOWN_OUTCOME', 'may_have_executed', 'response_lost', 'the answer never came', {
      health: true,
      provider: {},
      cause: new Error('socket hang up'),
    });
  };
  const run1 = {
    workflowExecution: { workflowId: 'wf-uncertain', runId: 'run-uncertain' },
    scheduledTimestampMs: Date.now(),
    scheduleToCloseTimeoutMs: 600_000,
  };
  await failureOf(
    activityEnv({ ...run1, attempt: 1 }).run(() =>
      attempt(
        call,
        (e) => e as Classified,
        async () => lost(),
      ),
    ),
  );
  expect(strict.get('stripe:create_refund').snapshot().state).toBe('open');

  // Refused, it is retried after the breaker's wait like any refusal (the send it delays was already safe to make),
  // but should the step's budget run out while refused, its failure says the refund may exist.
  const second = await failureOf(
    activityEnv({ ...run1, attempt: 2 }).run(() =>
      attempt(
        call,
        (e) => e as Classified,
        async () => ({ sent: true }),
      ),
    ),
  );
  expect(second).toMatchObject({ type: 'CAPACITY', nonRetryable: false });
  expect(second.nextRetryDelay).toBeGreaterThanOrEqual(detailsOf(second).retryAfterMs!);
  expect(detailsOf(second)).toMatchObject({
    certainty: 'may_have_executed',
    reason: 'circuit_open_after_uncertain_attempt',
  });
  const late = { ...run1, attempt: 3, scheduledTimestampMs: Date.now() - 599_000 };
  const outOfBudget = await failureOf(
    activityEnv(late).run(() =>
      attempt(
        call,
        (e) => e as Classified,
        async () => ({ sent: true }),
      ),
    ),
  );
  // Out of budget while refused, the step ends as it always did after an uncertain attempt: unknown, to be reconciled.
  expect(outOfBudget).toMatchObject({
    type: 'UNKNOWN_OUTCOME',
    nonRetryable: true,
    message: expect.stringMatching(/only \d+ ms of this step's budget are left/),
  });
  expect(detailsOf(outOfBudget)).toMatchObject({
    certainty: 'may_have_executed',
    reason: 'circuit_open_after_uncertain_attempt',
  });
  const lastAttempt = await failureOf(
    activityEnv({ ...run1, attempt: 8 }).run(() =>
      attempt(
        call,
        (e) => e as Classified,
        async () => ({ sent: true }),
      ),
    ),
  );
  expect(lastAttempt).toMatchObject({ type: 'UNKNOWN_OUTCOME', nonRetryable: true });

  // An attempt whose worker died before it finished may have sent its request too.
  const died = { ...call, key: 'refund:test:died:v1:create_refund', operationId: 'refund:test:died:v1' };
  await store.operations
    .openAttempt({ ...died, workflowId: 'wf-uncertain', runId: 'run-uncertain', attempt: 1 })
    .begun();
  const afterDeath = await failureOf(
    activityEnv({ ...run1, attempt: 2 }).run(() =>
      attempt(
        died,
        (e) => e as Classified,
        async () => ({ sent: true }),
      ),
    ),
  );
  expect(detailsOf(afterDeath)).toMatchObject({
    certainty: 'may_have_executed',
    reason: 'circuit_open_after_uncertain_attempt',
  });
  expect(afterDeath.message).toMatch(/attempt 1 of this step may have taken effect \(it never finished\)/);

  // So may one that made the refund and failed after (its receipt not kept).
  const unkept = { ...call, key: 'refund:test:unkept:v1:create_refund', operationId: 'refund:test:unkept:v1' };
  const row = store.operations.openAttempt({
    ...unkept,
    workflowId: 'wf-uncertain',
    runId: 'run-uncertain',
    attempt: 1,
  });
  await row.begun();
  await row.finish({
    transportRequests: 1,
    outcome: 'STATE_CONFLICT',
    certainty: 'completed',
    reason: 'receipt_not_recorded',
    retryAfterMs: null,
    nextDelayMs: 200,
    providerRequestId: 'req_1',
  });
  const afterUnkept = await failureOf(
    activityEnv({ ...run1, attempt: 2 }).run(() =>
      attempt(
        unkept,
        (e) => e as Classified,
        async () => ({ sent: true }),
      ),
    ),
  );
  expect(detailsOf(afterUnkept)).toMatchObject({
    certainty: 'may_have_executed',
    reason: 'circuit_open_after_uncertain_attempt',
  });

  // Another operation, never attempted: nothing can have happened, and the refusal says so.
  const other = { ...call, key: 'refund:test:fresh:v1:create_refund', operationId: 'refund:test:fresh:v1' };
  const fresh = await failureOf(
    activityEnv({ ...run1, attempt: 1 }).run(() =>
      attempt(
        other,
        (e) => e as Classified,
        async () => ({ sent: true }),
      ),
    ),
  );
  expect(fresh).toMatchObject({ type: 'CAPACITY' });
  expect(detailsOf(fresh)).toMatchObject({ certainty: 'not_executed', reason: 'circuit_open' });
});
