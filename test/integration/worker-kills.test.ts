// Worker deaths at the boundaries where a crash is most dangerous, with real processes: the worker
// runs as its own OS process, is SIGKILLed at the boundary, and a new one is started. Effects are
// counted at the Stripe server's ledger and request log, the mailbox and the store.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { startWorkerProcess, type WorkerProcess } from '../../tools/src/chaos/worker-process';
import { startRefund } from '../../src/client/refunds';
import type { StripeHook } from '../../tools/src/servers/stripe-server';
import { messageIdForKey } from '../../src/contract';
import { completed, startHarness, stopped, TEST_POLICY, type Harness } from '../helpers/harness';

let h: Harness;
let worker: WorkerProcess | undefined;
/** Called by the Stripe server right after it performed an effect, before it answers. */
let afterEffect: StripeHook | undefined;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-kills-'));

beforeAll(async () => {
  h = await startHarness({
    network: true,
    inProcessWorker: false,
    stripeHooks: { afterEffect: (ctx) => afterEffect?.(ctx) },
  });
  // The shortest SMTP attempt a worker accepts: a dead worker's attempt times out soon.
  fs.writeFileSync(
    path.join(dir, 'policy.json'),
    JSON.stringify({
      ...TEST_POLICY,
      timeouts: { ...TEST_POLICY.timeouts, smtp: { startToCloseMs: 10_000, scheduleToCloseMs: 60_000 } },
    }),
  );
  // Built once: each worker process loads it instead of bundling for seconds.
  fs.writeFileSync(path.join(dir, 'workflows.js'), h.workflowBundle.code);
});
afterEach(async () => {
  afterEffect = undefined;
  await worker?.kill();
  await h.toxiproxy!.reset();
});
afterAll(async () => {
  await h?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A worker process on the harness's stack, reaching Temporal through the proxy, with the test policy. */
const spawnWorker = () =>
  startWorkerProcess({
    ...h.cliEnv(),
    TEMPORAL_ADDRESS: h.proxies!.temporal.listen,
    DATA_DIR: dir,
    RECOVERY_POLICY_FILE: path.join(dir, 'policy.json'),
    WEBHOOKS: 'off',
    WORKFLOW_BUNDLE: path.join(dir, 'workflows.js'),
    STRIPE_TIMEOUT_MS: '2000',
    STRIPE_LIST_CONSISTENCY_MS: '300',
  });
const until = async (what: string, check: () => Promise<boolean>, ms = 30_000) => {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50)))
    if (await check()) return;
  throw new Error(`timed out waiting for ${what}`);
};
const isCreate = (ctx: Parameters<StripeHook>[0], paymentIntentId: string) =>
  ctx.method === 'POST' && ctx.path === '/v1/refunds' && ctx.params.payment_intent === paymentIntentId;

test('the worker is SIGKILLed after Stripe made the refund, before the answer reached it: the retry replays the same key, one refund', async () => {
  worker = await spawnWorker();
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
  const createKey = `refund:test:${order.id}:v1:create_refund`;
  let killed: Promise<void> | undefined;
  afterEffect = (ctx) => {
    // Answered only once the worker is dead (the hook is awaited): it never sees the answer.
    if (isCreate(ctx, order.paymentIntentId) && !killed) return (killed = worker!.kill());
  };
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  await until('the kill', async () => killed !== undefined);
  await killed;
  // The receipt was never saved: the store knows a request went out, not what became of it.
  expect(await h.store.operations.get(`refund:test:${order.id}:v1`)).toMatchObject({
    status: 'intent',
    requestsSent: 1,
    refund: null,
  });
  worker = await spawnWorker();

  const result = completed(await handle.result());
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  const sent = await h.requests({ idempotencyKey: createKey });
  // The first request made the refund; the retry, after the attempt's timeout, got the stored answer.
  expect(sent.map((r) => Boolean(r.replayed))).toEqual([false, true]);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  expect(result.refund).toMatchObject({ refundId: (await h.ledger(order.paymentIntentId))[0]!.objectId });
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250 });
});

test('the worker saved the receipt but died before Temporal heard the activity complete: the retry replays the receipt and sends nothing', async () => {
  worker = await spawnWorker();
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
  const operationId = `refund:test:${order.id}:v1`;
  let cut: Promise<void> | undefined;
  afterEffect = (ctx) => {
    // The frontend goes away just before the answer reaches the worker: it saves the receipt, and cannot report the result.
    // The server answers only once it is gone (the hook is awaited): otherwise a quick worker reports the result first.
    if (isCreate(ctx, order.paymentIntentId) && !cut) return (cut = h.toxiproxy!.setEnabled('temporal', false));
  };
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  await until('the receipt saved', async () => (await h.store.operations.get(operationId))?.status === 'refunded');
  await cut;
  await worker.kill();
  await h.toxiproxy!.setEnabled('temporal', true);
  worker = await spawnWorker();

  const result = completed(await handle.result());
  expect(result.refund.replayed).toBe(true);
  expect(await h.requests({ idempotencyKey: `${operationId}:create_refund` })).toHaveLength(1);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
});

test('the worker dies mid-compensation, while the correction email is being handed over: it is quarantined, never resent blind, and the rest is compensated', async () => {
  worker = await spawnWorker();
  // The provider fails the refund at once: the gate finds it failed and compensates, the correction email first.
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`, { paymentMethod: 'pm_card_refundFail' });
  const operationId = `refund:test:${order.id}:v1`;
  const correctionKey = `${operationId}:notify_customer:compensate`;
  // The mail server holds the correction's DATA for a while (then refuses it): the worker dies while it waits.
  await h.mailFault({
    kind: 'reply',
    stage: 'data',
    code: 451,
    message: '4.3.0 held',
    delayMs: 5000,
    match: { messageId: messageIdForKey(correctionKey) },
  });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  await until(
    'the correction handed over',
    async () => (await h.store.getNotification(correctionKey))?.status === 'sending',
  );
  await worker.kill();
  worker = await spawnWorker();

  const parked = await stopped(handle);
  expect(parked.status).toBe('needs_attention');
  const steps = Object.fromEntries(parked.state.steps.map((s) => [s.name, s]));
  expect(steps.notify_customer!.compensation).toMatchObject({ status: 'unknown', key: correctionKey });
  expect(steps.update_order!.compensation).toMatchObject({ status: 'completed' });
  expect(parked.state.outcome).toMatchObject({ quarantined: true });
  // Nothing was sent twice: the notice once, the correction not at all (the server never accepted it), the order restored.
  const mail = await h.messages({ to: order.customerEmail });
  expect(mail.map((m) => m.messageId)).toEqual([messageIdForKey(`${operationId}:notify_customer`)]);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 0, status: 'paid' });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('the worker dies right after the intent is committed, before anything is sent: a new worker begins the same operation again and refunds once', async () => {
  worker = await spawnWorker();
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
  const operationId = `refund:test:${order.id}:v1`;
  // Stripe is unreachable until the worker is dead, so the kill lands between the commit and any request reaching it.
  await h.toxiproxy!.setEnabled('stripe', false);
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  await until('the intent committed', async () => (await h.store.operations.get(operationId)) !== undefined);
  await worker.kill();
  expect(await h.store.operations.get(operationId)).toMatchObject({ status: 'intent', refund: null });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(0);
  await h.toxiproxy!.setEnabled('stripe', true);
  worker = await spawnWorker();

  completed(await handle.result());
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.requests({ idempotencyKey: `${operationId}:create_refund` })).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  const trail = await h.store.operations.auditTrail(operationId);
  expect(trail.filter((a) => a.event === 'intent_committed')).toHaveLength(1);
});
