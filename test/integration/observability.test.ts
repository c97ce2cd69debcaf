// What a worker tells its operators: JSON log lines that carry the workflow id, the operation id
// and the attempt (pino, as the worker's logger), OpenTelemetry spans for the run and each
// activity attempt, exported by Temporal's interceptors, and metrics a Prometheus server scrapes.
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { MockActivityEnvironment } from '@temporalio/testing';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Classified, createAttemptRunner } from '../../src/activities/attempt';
import { createLogger } from '../../src/observability/logging';
import { startTracing } from '../../src/observability/tracing';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { openStore, type OrderStore } from '../../src/store';
import {
  completed,
  fewLookups,
  policyFileText,
  startHarness,
  stopped,
  UNSIGNED_ENV,
  type Harness,
} from '../helpers/harness';
import { startRefund } from '../../src/client/refunds';
import { checkoutWorkflowId, stepsQuery } from '../../src/contract';
import { checkoutWorkflow } from '../../src/workflows';
import { METRICS } from '../../src/observability/metrics';
import { startWorkerProcess, type WorkerProcess } from '../../tools/src/chaos/worker-process';
import { freePort } from '../../tools/src/stack/processes';
import { seedCart, setStock } from '../../tools/src/shop/carts';
import { scriptPath } from '../helpers/compiled';

describe('JSON logs', () => {
  let store: OrderStore;
  beforeAll(async () => {
    store = await openStore('sqlite::memory:');
  });
  afterAll(() => store.close());

  it('carry the workflow id, the operation id, the step and the attempt, one JSON object per line', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        done();
      },
    });
    const logger = createLogger('info', sink);
    const env = new MockActivityEnvironment(
      {
        attempt: 3,
        workflowExecution: { workflowId: 'refund-ord_9-v1', runId: 'run-1' },
        scheduledTimestampMs: Date.now(),
        scheduleToCloseTimeoutMs: 60_000,
      },
      { logger },
    );
    const attempt = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
    const call = {
      step: 'update_order',
      key: 'refund:test:ord_9:v1:update_order',
      operationId: 'refund:test:ord_9:v1',
      boundary: 'store' as const,
    };
    await env.run(() =>
      attempt(
        call,
        (e) => e as Classified,
        async () => ({ ok: true }),
      ),
    );
    await env
      .run(() =>
        attempt(
          call,
          (e) => e as Classified,
          async () => {
            throw new Classified('STATE_CONFLICT', 'not_executed', 'version_conflict', 'the order moved on');
          },
        ),
      )
      .catch(() => undefined);

    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const ours = records.filter((r) => typeof r.msg === 'string' && (r.msg as string).startsWith('step attempt'));
    expect(ours).toEqual([
      expect.objectContaining({
        level: 'info',
        msg: 'step attempt succeeded',
        workflowId: 'refund-ord_9-v1',
        operationId: 'refund:test:ord_9:v1',
        step: 'update_order',
        attempt: 3,
      }),
      expect.objectContaining({
        level: 'warn',
        msg: 'step attempt failed',
        workflowId: 'refund-ord_9-v1',
        operationId: 'refund:test:ord_9:v1',
        attempt: 3,
        code: 'STATE_CONFLICT',
        reason: 'version_conflict',
      }),
    ]);
    expect(typeof records[0].time).toBe('string');
  });
});

// One stack for the file: its in-process worker exports traces; the metrics' worker is a process of its own, on a queue of its own.
const exporter = new InMemorySpanExporter();
const tracing = startTracing(exporter, 'refunds-test');
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tracing });
});
afterAll(async () => {
  await h?.close();
  await tracing.shutdown();
});

describe('traces', () => {
  it('has a span for each activity attempt of the run, naming the run', async () => {
    const order = await h.seedOrder('traced-1');
    const { handle, workflowId } = await startRefund(h.env.client, {
      orderId: order.id,
      amount: 1250,
      currency: 'usd',
      reason: 'requested_by_customer',
      requestedBy: 'test',
    });
    completed(await handle.result());
    const spans = exporter.getFinishedSpans().filter((s) => s.attributes.temporalWorkflowId === workflowId);
    // The order update rides in createRefund's receipt transaction, the gate's first look in sendRefundNotice's
    // activity: neither has an activity, so a span, of its own.
    expect(spans.map((s) => s.name)).toEqual(
      expect.arrayContaining([
        'RunActivity:beginOperation',
        'RunActivity:createRefund',
        'RunActivity:sendRefundNotice',
      ]),
    );
    expect(spans[0]!.resource.attributes['service.name']).toBe('refunds-test');
    expect(spans[0]!.attributes.run_id).toBe((await handle.describe()).runId);
  });
});

/**
 * The worker process's /metrics (METRICS_PROMETHEUS_ADDRESS): the SDK's own metrics and ours, as
 * Prometheus reads them. Each case compares the counts before and after a run of its kind.
 */
describe('metrics', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-metrics-'));
  const taskQueue = 'refunds-metrics';
  let worker: WorkerProcess;
  let metricsUrl: string;

  beforeAll(async () => {
    // Two attempts at a transient failure: the parked case parks in a second or two.
    fs.writeFileSync(path.join(dir, 'policy.json'), policyFileText(fewLookups(3)));
    fs.writeFileSync(path.join(dir, 'workflows.js'), h.workflowBundle.code);
    const address = `127.0.0.1:${await freePort()}`;
    metricsUrl = `http://${address}/metrics`;
    worker = await startWorkerProcess(
      {
        ...h.cliEnv(),
        ...UNSIGNED_ENV,
        DATA_DIR: dir,
        TASK_QUEUE: taskQueue,
        RECOVERY_POLICY_FILE: path.join(dir, 'policy.json'),
        WORKFLOW_BUNDLE: path.join(dir, 'workflows.js'),
        WEBHOOKS: 'off',
        STRIPE_TIMEOUT_MS: '2000',
        STRIPE_LIST_CONSISTENCY_MS: '300',
        METRICS_PROMETHEUS_ADDRESS: address,
        LOG_LEVEL: 'info',
      },
      undefined,
      scriptPath('worker.ts'),
    );
  });
  afterAll(async () => {
    await worker?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Every sample of the exposition text, by series: `name{label="value",…}` as written. */
  async function scrape(): Promise<Map<string, number>> {
    const text = await (await fetch(metricsUrl)).text();
    const samples = new Map<string, number>();
    for (const line of text.split('\n')) {
      const m = /^([a-zA-Z_:][\w:]*)(\{.*\})?\s+(\S+)$/.exec(line);
      if (m) samples.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
    }
    return samples;
  }
  /** The sum of a metric's series that carry these labels. */
  const total = (samples: Map<string, number>, name: string, labels: Record<string, string> = {}) =>
    [...samples]
      .filter(([series]) => series === name || series.startsWith(`${name}{`))
      .filter(([series]) => Object.entries(labels).every(([k, v]) => series.includes(`${k}="${v}"`)))
      .reduce((sum, [, value]) => sum + value, 0);
  /** Scrapes until `expected` holds (the exporter sees a run's last counts a moment after its result), then returns what was read. */
  async function scrapeUntil(expected: (s: Map<string, number>) => boolean): Promise<Map<string, number>> {
    let samples = await scrape();
    for (const end = Date.now() + 10_000; !expected(samples) && Date.now() < end; samples = await scrape())
      await new Promise((r) => setTimeout(r, 100));
    return samples;
  }
  const request = (orderId: string) => ({ orderId, amount: 1250, currency: 'usd', requestedBy: 'test' });
  const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;

  it('count a completed run once, replayed or not, its attempts, provider requests and hand-over; the SDK exports its own beside them', async () => {
    const before = await scrape();
    const order = await h.seedOrder(newOrderId());
    const { handle } = await startRefund(h.env.client, request(order.id), taskQueue);
    completed(await handle.result());
    // A Query to a closed run replays its whole history on the worker: the workflow's meter records nothing then.
    expect((await handle.query(stepsQuery)).status).toBe('completed');
    expect(worker.output()).not.toMatch(/nondetermin/i);
    const after = await scrapeUntil((s) => total(s, METRICS.ended.name) > total(before, METRICS.ended.name));
    const delta = (name: string, labels?: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels);

    // It was replayed (the SDK times each replay), and still counted once.
    expect(delta('temporal_workflow_task_replay_latency_count')).toBeGreaterThan(0);
    expect(delta(METRICS.started.name)).toBe(1);
    expect(delta(METRICS.ended.name, { outcome: 'completed' })).toBe(1);
    expect(delta(METRICS.ended.name)).toBe(1);
    expect(delta(METRICS.attempts.name, { step: 'create_refund', outcome: 'ok' })).toBe(1);
    expect(delta(METRICS.attempts.name, { step: 'update_order', outcome: 'ok' })).toBe(1);
    expect(delta(METRICS.providerRequests.name, { boundary: 'stripe', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(delta(METRICS.providerRequests.name, { boundary: 'smtp', outcome: 'ok' })).toBe(1);
    expect(delta(METRICS.handOvers.name, { outcome: 'sent' })).toBe(1);
    expect(delta(METRICS.parked.name)).toBe(0);
    // The store's work for the run: its reads, writes and commits (each transaction's BEGIN and COMMIT among them).
    expect(delta(METRICS.storeStatements.name, { kind: 'select' })).toBeGreaterThan(0);
    expect(delta(METRICS.storeStatements.name, { kind: 'insert' })).toBeGreaterThan(0);
    expect(delta(METRICS.storeStatements.name, { kind: 'commit' })).toBeGreaterThan(0);
    expect(delta(METRICS.storeCommits.name)).toBeGreaterThanOrEqual(
      delta(METRICS.storeStatements.name, { kind: 'commit' }),
    );
    // Each step's ledger row rides in the step's own transactions: the run commits 8 times (17 when each row's
    // start and end committed alone), within the 10 of issue 26.
    expect(delta(METRICS.storeCommits.name)).toBeLessThanOrEqual(10);
    expect(total(after, METRICS.breaker.name, { breaker: 'stripe:create_refund' })).toBe(0);
    // The SDK's own, under their temporal_ names: the run's workflow and its activities on this worker's queues.
    expect(total(after, 'temporal_workflow_completed', { task_queue: taskQueue })).toBeGreaterThanOrEqual(1);
    expect(total(after, 'temporal_activity_execution_latency_count')).toBeGreaterThan(0);
    // The Core's own log lines reach the worker's pino logger: JSON, like every other line.
    const core = worker
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{') && l.includes('"sdkComponent":"core"'));
    expect(core.length).toBeGreaterThan(0);
  });

  it('count a checkout run among the runs, under its workflow type', async () => {
    const checkout = { workflowType: 'checkoutWorkflow' };
    const before = await scrape();
    const cartId = `cart_${randomUUID().slice(0, 8)}`;
    await setStock(h.store, `${cartId}-a`, 5);
    const items = [{ sku: `${cartId}-a`, quantity: 1 }];
    await seedCart(h.store, {
      id: cartId,
      customerEmail: `${cartId}@example.com`,
      currency: 'usd',
      amount: 900,
      items,
    });
    const result = await h.env.client.workflow.execute(checkoutWorkflow, {
      taskQueue,
      workflowId: checkoutWorkflowId(cartId),
      args: [{ cartId, paymentMethod: 'pm_card_visa', requestedBy: 'test' }],
    });
    expect(result.status).toBe('completed');
    const after = await scrapeUntil(
      (s) => total(s, METRICS.ended.name, checkout) > total(before, METRICS.ended.name, checkout),
    );
    const delta = (name: string, labels: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels);
    expect(delta(METRICS.started.name, checkout)).toBe(1);
    expect(delta(METRICS.ended.name, { ...checkout, outcome: 'completed' })).toBe(1);
    expect(delta(METRICS.attempts.name, { step: 'charge_card', outcome: 'ok' })).toBe(1);
  });

  it('count a parked run by its verdict, and the failed attempts that parked it, not as ended', async () => {
    const before = await scrape();
    const order = await h.seedOrder(newOrderId());
    // The completion gate cannot read the provider: the run parks, auto-retry being safe.
    await h.failProviderReads(order.paymentIntentId);
    const { handle } = await startRefund(h.env.client, request(order.id), taskQueue);
    const { status } = await stopped(handle);
    expect(status).toBe('needs_attention');
    const after = await scrapeUntil((s) => total(s, METRICS.parked.name) > total(before, METRICS.parked.name));
    const delta = (name: string, labels?: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels);

    expect(delta(METRICS.started.name)).toBe(1);
    expect(delta(METRICS.parked.name, { verdict: 'auto_retry_is_safe' })).toBe(1);
    expect(delta(METRICS.parked.name)).toBe(1);
    expect(delta(METRICS.ended.name)).toBe(0);
    expect(delta(METRICS.attempts.name, { step: 'completion_gate' })).toBeGreaterThanOrEqual(1);
    expect(delta(METRICS.attempts.name, { step: 'completion_gate', outcome: 'ok' })).toBe(0);
    await handle.terminate('the metrics test is done with it');
  });

  it('count a reconciliation by what it found, and the run it completed', async () => {
    const before = await scrape();
    const order = await h.seedOrder(newOrderId());
    // The refund is made, its answer lost: the run looks it up and finds it.
    await h.stripeFault({
      kind: 'drop_after_commit',
      match: { idempotencyKey: `refund:test:${order.id}:v1:create_refund` },
    });
    completed(await (await startRefund(h.env.client, request(order.id), taskQueue)).handle.result());
    const after = await scrapeUntil((s) => total(s, METRICS.ended.name) > total(before, METRICS.ended.name));
    const delta = (name: string, labels?: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels);

    expect(delta(METRICS.reconciliations.name, { result: 'completed' })).toBe(1);
    expect(delta(METRICS.reconciliations.name)).toBe(1);
    expect(delta(METRICS.attempts.name, { step: 'create_refund', outcome: 'unknown_outcome' })).toBe(1);
    expect(delta(METRICS.attempts.name, { step: 'reconcile', outcome: 'ok' })).toBe(1);
    expect(delta(METRICS.ended.name, { outcome: 'completed' })).toBe(1);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  });
});
