// Sends the activities' real requests to Stripe's official stripe-mock, which validates every
// request against Stripe's OpenAPI spec, so a param real Stripe would refuse fails here first.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { createAttemptRunner } from '../../src/activities/attempt';
import { createCompletionGate } from '../../src/activities/completion-gate';
import { refundCreation, type CreateRefundInput } from '../../src/activities/create-refund';
import { refundReconciliation } from '../../src/activities/reconcile-refund';
import { createStripeClient, stripeIn, type StripeFor } from '../../src/activities/stripe-client';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { startStripeServer, type StripeServer } from '../../tools/src/servers/stripe-server';
import { findTool } from '../../tools/src/stack/tools';
import { openStore } from '../../src/store';
import { activityEnv } from '../helpers/activity-env';

const KEY = 'sk_test_conformance';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stripe-conformance-'));
let mock: ChildProcess;
let mockStripe: Stripe;
let local: StripeServer;
let localStripe: Stripe;

/** Starts stripe-mock on free loopback ports and resolves with its HTTP base URL once it listens. */
function startStripeMock(bin: string): Promise<{ child: ChildProcess; url: string }> {
  // Both listeners get ephemeral loopback ports; with only -http-addr, HTTPS still binds :12112 on all interfaces.
  const child = spawn(bin, ['-http-addr', '127.0.0.1:', '-https-addr', '127.0.0.1:'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    let settled = false;
    const settle = (err?: Error, url?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.stdout?.removeAllListeners('data').resume();
      child.stderr?.removeAllListeners('data').resume();
      if (url) return resolve({ child, url });
      child.kill();
      reject(err);
    };
    const timer = setTimeout(() => settle(new Error(`stripe-mock did not start within 15s:\n${output}`)), 15_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Listening for HTTP at address: (\S+)/.exec(output);
      if (match) settle(undefined, `http://${match[1]}`);
    });
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (err) => settle(err));
    child.once('exit', (code) => settle(new Error(`stripe-mock exited with ${code}:\n${output}`)));
  });
}

function refundInput(paymentIntentId: string): CreateRefundInput {
  return {
    orderId: 'ord_conformance',
    operationId: 'op_conformance',
    paymentIntentId,
    amount: 100,
    // stripe-mock answers with its usd fixture whatever the intent.
    currency: 'usd',
    reason: 'requested_by_customer',
    idempotencyKey: 'refund:ord_conformance:v1',
  };
}

// Requests our code must never send: each breaks Stripe's spec in a different way.
const malformed: Array<[string, Record<string, unknown>]> = [
  ['an unknown field', { payment_intent: 'pi_123', amount: 100, refund_everything: 'yes' }],
  ['a reason outside the enum', { payment_intent: 'pi_123', amount: 100, reason: 'because' }],
  ['a non-integer amount', { payment_intent: 'pi_123', amount: '1.5' }],
];

beforeAll(async () => {
  const started = await startStripeMock(findTool('stripe-mock'));
  mock = started.child;
  mockStripe = createStripeClient({ secretKey: KEY, apiBase: started.url });
  local = await startStripeServer({ port: 0, dbPath: path.join(dir, 'stripe.db') });
  localStripe = createStripeClient({ secretKey: KEY, apiBase: local.url });
});

afterAll(async () => {
  if (mock && mock.exitCode === null) {
    const exited = new Promise((resolve) => mock.once('exit', resolve));
    mock.kill('SIGTERM');
    await exited;
  }
  await local?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('accepts the payment intent the demo seeds', async () => {
  // The same params as tools/src/shop/orders.ts.
  const pi = await mockStripe.paymentIntents.create(
    {
      amount: 1000,
      currency: 'usd',
      payment_method: 'pm_card_visa',
      confirm: true,
      automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
      metadata: { order_id: 'ord_conformance' },
    },
    { idempotencyKey: 'seed:ord_conformance' },
  );
  expect(pi.id).toMatch(/^pi_/);
  expect((await mockStripe.paymentIntents.retrieve(pi.id)).object).toBe('payment_intent');
});

it('accepts every request the refund, the reconciliation and the completion gate send', async () => {
  const store = await openStore(`sqlite:${path.join(dir, 'orders.db')}`);
  const attempt = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
  const stripe: StripeFor = (a) => stripeIn(mockStripe, a);
  const deps = {
    stripe,
    log: store.operations,
    attempt,
    windows: { dedupeWindowMs: 3600_000, consistencyMs: 0, requestTimeoutMs: 5000 },
  };
  const payments = { ...refundCreation(deps), ...refundReconciliation(deps) };
  const { checkCompletion } = createCompletionGate({ stripe, store, attempt });
  const { run } = activityEnv();
  const input = refundInput('pi_123');
  await store.operations.commitIntent({
    ...input,
    operationVersion: 1,
    scope: 'test',
    requestHash: 'h',
    request: { ...input },
    actor: 'test',
  });
  try {
    // Whatever stripe-mock answers (its fixtures), a request it refuses would throw here.
    const receipt = await run(payments.createRefund, input).catch((err: { details?: { reason?: string }[] }) => {
      expect(err.details?.[0]?.reason).toBe('refund_differs');
      return undefined;
    });
    if (receipt) expect(receipt.refundId).toMatch(/^re_/);
    const reconciled = await run(payments.reconcileRefund, { ...input });
    expect(reconciled.method).toMatch(/^(retrieve|list)$/);
    const gate = await run(checkCompletion, { ...input, orderId: input.orderId, refundId: 're_123', noticeKey: 'k' });
    expect(gate.findings.map((f) => f.check)).toContain('provider_receipt');
  } finally {
    await store.close();
  }
});

describe.each(malformed)('rejects a refund with %s', (_name, params) => {
  it.each([
    ['stripe-mock', () => mockStripe],
    ['the local server', () => localStripe],
  ])('on %s', async (_server, client) => {
    const err = await client()
      .refunds.create(params as Stripe.RefundCreateParams)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(err).toMatchObject({ statusCode: 400 });
  });
});
