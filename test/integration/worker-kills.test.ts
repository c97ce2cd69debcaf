// Worker deaths at the boundaries where a crash is most dangerous, with real processes: the worker
// runs as its own OS process, is SIGKILLed at the boundary, and a new one is started. Effects are
// counted at the Stripe server's ledger and request log, the mailbox and the store. And the graceful
// stop a deploy sends (SIGTERM): the drain, with the worker's readiness probe.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { startWorkerProcess, type WorkerProcess } from '../../tools/src/chaos/worker-process';
import { startRefund } from '../../src/client/refunds';
import type { StripeHook } from '../../tools/src/servers/stripe-server';
import { messageIdForKey } from '../../src/contract';
import {
  completed,
  policyFileText,
  startHarness,
  stopped,
  TEST_POLICY,
  UNSIGNED_ENV,
  type Harness,
} from '../helpers/harness';
import { scriptPath } from '../helpers/compiled';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { createRefundWorker } from '../../src/worker-pools';
import { openStore } from '../../src/store';
import { parseKeyring } from '../../src/codec/keyring';
import { startHealthServer, workerReadiness } from '../../src/observability/health';

const EventType = temporal.api.enums.v1.EventType;
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
    policyFileText({
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

/** A worker process (the run's compiled worker) on the harness's stack, reaching Temporal through the proxy, with the test policy. */
const spawnWorker = (env: NodeJS.ProcessEnv = {}) =>
  startWorkerProcess(
    {
      ...h.cliEnv(),
      ...UNSIGNED_ENV,
      TEMPORAL_ADDRESS: h.proxies!.temporal.listen,
      DATA_DIR: dir,
      RECOVERY_POLICY_FILE: path.join(dir, 'policy.json'),
      WEBHOOKS: 'off',
      WORKFLOW_BUNDLE: path.join(dir, 'workflows.js'),
      STRIPE_TIMEOUT_MS: '2000',
      STRIPE_LIST_CONSISTENCY_MS: '300',
      // A killed worker's runs move to the next one after a second instead of the SDK's 10 s.
      STICKY_TIMEOUT_MS: '1000',
      ...env,
    },
    undefined,
    scriptPath('worker.ts'),
  );
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
  // The dead worker had the run cached: its next task waited for it STICKY_TIMEOUT_MS (1 s), not 10 s. (When the dead
  // worker's queue has gone unpolled long enough, e.g. on a loaded machine, the server routes the task on at once.)
  const events = (await handle.fetchHistory()).events!;
  const at = (i: number) => Number(events[i]!.eventTime!.seconds) * 1000 + (events[i]!.eventTime!.nanos ?? 0) / 1e6;
  const next = (type: number, from: number) => events.findIndex((e, i) => i > from && e.eventType === type);
  const refunded = next(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 0);
  const scheduled = next(EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, refunded);
  expect(at(next(EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, scheduled)) - at(scheduled)).toBeLessThan(5000);
  expect(worker.output()).toMatch(/"stickyTimeoutMs":1000/);
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

/** The readiness probe's answer. */
const readyz = async (base: string) => {
  const res = await fetch(`${base}/readyz`);
  return { status: res.status, body: (await res.json()) as { ready: boolean; failed: string[]; checks: object } };
};

test('readiness: 200 while Temporal serves, every pool polls and the store answers; 503 naming the store once it is gone, the pools once they stop, and Temporal once it is unreachable', async () => {
  const store = await openStore(h.cliEnv().DATABASE_URL!);
  const w = await createRefundWorker({
    connection: h.env.nativeConnection,
    namespace: h.namespace,
    taskQueue: `health-${randomUUID()}`,
    activities: h.activities,
    workflowBundle: h.workflowBundle,
    dataConverter: h.dataConverter,
  });
  // Temporal through the harness's proxy, so that the case can take it away; without retries, as the worker's probe
  // (a retry left pending fired on the closed channel after the case: seen once in a fresh-clone run).
  const temporal = await Connection.connect({ address: h.proxies!.temporal.listen, interceptors: [] });
  const checks = workerReadiness({
    draining: () => 'not draining',
    temporal,
    workers: () => w.workers,
    store,
    keyring: parseKeyring(h.payloadKeys, 'test'),
  });
  const health = await startHealthServer(checks, { host: '127.0.0.1', port: 0 });
  try {
    expect(await readyz(health.url)).toMatchObject({ status: 503, body: { ready: false, failed: ['pools'] } });
    const running = w.run();
    expect((await fetch(`${health.url}/healthz`)).status).toBe(200);
    expect(await readyz(health.url)).toMatchObject({
      status: 200,
      body: {
        ready: true,
        failed: [],
        checks: { temporal: { ok: true }, pools: { ok: true }, store: { ok: true }, codec: { ok: true } },
      },
    });
    await store.close();
    expect(await readyz(health.url)).toMatchObject({
      status: 503,
      body: { failed: ['store'], checks: { store: { ok: false, error: expect.any(String) } } },
    });
    w.shutdown();
    await running;
    expect(await readyz(health.url)).toMatchObject({ status: 503, body: { failed: ['pools', 'store'] } });
    // Temporal unreachable: not ready, whatever the pollers say (the core retries a failed poll, and they stay POLLING).
    await h.toxiproxy!.setEnabled('temporal', false);
    expect(await readyz(health.url)).toMatchObject({
      status: 503,
      body: { failed: expect.arrayContaining(['temporal']), checks: { temporal: { ok: false } } },
    });
  } finally {
    w.shutdown();
    await health.close();
    await temporal.close();
    await h.toxiproxy!.setEnabled('temporal', true);
  }
});

/** Holds the first create request for the payment intent, its effect made, until released. */
const holdCreate = (paymentIntentId: string) => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let heldAt: number | undefined;
  afterEffect = (ctx) => {
    if (!isCreate(ctx, paymentIntentId) || heldAt !== undefined) return;
    heldAt = Date.now();
    return released;
  };
  return { held: async () => heldAt !== undefined, release };
};
/** The drain's phases as the worker logged them: how long each took, and when it ended after the signal. */
const drainPhases = (output: string) =>
  output
    .split('\n')
    .filter((line) => line.includes('"phase"'))
    .map((line) => JSON.parse(line) as { phase: string; ms?: number; sinceSignalMs?: number; failed?: boolean })
    .map(
      (l) =>
        `${l.phase}${l.failed ? ' FAILED' : ''}${l.ms === undefined ? '' : ` ${l.ms} ms (at ${l.sinceSignalMs} ms)`}`,
    )
    .join('; ');

test('a SIGTERM while Stripe holds the refund request: the drain waits for the answer, records it and exits 0; with a grace time too short it gives up, exits 1, and the run is completed by the next worker as after a crash; one refund each', async () => {
  const refund = async () => {
    const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
    const hold = holdCreate(order.paymentIntentId);
    const { handle } = await startRefund(h.env.client, {
      orderId: order.id,
      amount: 1250,
      currency: 'usd',
      requestedBy: 'test',
    });
    await until('the request held', hold.held);
    return { order, operationId: `refund:test:${order.id}:v1`, handle, release: hold.release };
  };
  const timings: string[] = [];

  // The default grace time (the test policy's longest attempt, 10 s) outlasts the held request.
  worker = await spawnWorker({ HEALTH_ADDRESS: '127.0.0.1:0', STRIPE_TIMEOUT_MS: '3000' });
  const health = /health endpoints on (http:\/\/[\d.:]+)\/healthz/.exec(worker.output())![1]!;
  await until('ready', async () => (await readyz(health)).status === 200);
  const first = await refund();
  let signalled = Date.now();
  const stopping = worker.stop();
  await until('readiness false', async () => (await readyz(health)).status === 503);
  // Draining, and the pools no longer poll.
  expect((await readyz(health)).body).toMatchObject({ ready: false, failed: ['draining', 'pools'] });
  await new Promise((r) => setTimeout(r, 1000));
  first.release();
  await stopping;
  expect(Date.now() - signalled).toBeLessThan(10_000);
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  timings.push(`held 1 s: ${drainPhases(worker.output())}`);
  // The draining worker recorded the answer: the refund is known, not an unknown outcome to reconcile.
  const record = await h.store.operations.get(first.operationId);
  expect(record).toMatchObject({ status: 'refunded', requestsSent: 1 });
  const attempts = await h.store.operations.attempts(
    `${first.operationId}:create_refund`,
    (await first.handle.describe()).runId,
  );
  expect(attempts.map((a) => a.outcome)).toEqual(['ok']);

  // The next worker completes the first run, and drains with a grace time shorter than the hold.
  worker = await spawnWorker({ SHUTDOWN_GRACE_MS: '200', STRIPE_TIMEOUT_MS: '3000' });
  const result = completed(await first.handle.result());
  expect(result.refund.refundId).toBe(record!.refund!.refundId);
  expect(await h.ledger(first.order.paymentIntentId)).toHaveLength(1);
  expect(await h.requests({ idempotencyKey: `${first.operationId}:create_refund` })).toHaveLength(1);
  expect(await h.messages({ to: first.order.customerEmail })).toHaveLength(1);

  const second = await refund();
  signalled = Date.now();
  await worker.stop();
  const cutAfterMs = Date.now() - signalled;
  second.release();
  expect(await worker.exited).toEqual({ code: 1, signal: null });
  expect(worker.output()).toMatch(/the drain did not finish/);
  expect(worker.output()).toMatch(/drain: pools stopped, tasks in flight finished: failed after/);
  timings.push(`grace 200 ms: gave up after ${cutAfterMs} ms: ${drainPhases(worker.output())}`);
  expect(await h.store.operations.get(second.operationId)).toMatchObject({ status: 'intent', refund: null });
  worker = await spawnWorker();

  // As after a crash: the attempt times out, the retry sends the same key and gets the stored answer.
  completed(await second.handle.result());
  expect(await h.ledger(second.order.paymentIntentId)).toHaveLength(1);
  const sent = await h.requests({ idempotencyKey: `${second.operationId}:create_refund` });
  expect(sent.map((r) => Boolean(r.replayed))).toEqual([false, true]);
  expect(await h.messages({ to: second.order.customerEmail })).toHaveLength(1);
  console.log(`drain timings: ${timings.join(' | ')}`);
});
