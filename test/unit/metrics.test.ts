// The project's metrics as the recorder writes them (names, label values), and the attempt runner's
// counts and breaker gauge, over a meter that remembers what it was given. The real exporter and the
// workflow's replay-aware meter: test/integration/observability.test.ts.
import type { MetricMeter, MetricTags } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { activityMetrics } from '../../src/activities/activity-metrics';
import { Classified, createAttemptRunner } from '../../src/activities/attempt';
import { METRICS, refundMetrics, storeMetrics } from '../../src/observability/metrics';
import { Breakers } from '../../src/reliability/circuit-breaker';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import type { OperationLog } from '../../src/store';

interface Recorded {
  name: string;
  value: number;
  tags: MetricTags;
}

/** A MetricMeter that keeps every value it is given, counters and gauges alike. */
function recordingMeter(): MetricMeter & { recorded: Recorded[] } {
  const recorded: Recorded[] = [];
  const metric = (name: string, valueType: 'int' | 'float' = 'int') => ({
    name,
    unit: undefined,
    description: undefined,
    kind: 'counter' as const,
    valueType,
    add: (value: number, tags: MetricTags = {}) => void recorded.push({ name, value, tags }),
    set: (value: number, tags: MetricTags = {}) => void recorded.push({ name, value, tags }),
    record: (value: number, tags: MetricTags = {}) => void recorded.push({ name, value, tags }),
  });
  const meter = {
    recorded,
    createCounter: (name: string) => metric(name),
    createGauge: (name: string) => metric(name),
    createHistogram: (name: string) => metric(name),
    withTags: () => meter,
  };
  return meter as unknown as MetricMeter & { recorded: Recorded[] };
}

test('the recorder writes each metric under its one name, with low-cardinality label values', () => {
  const meter = recordingMeter();
  const m = refundMetrics(meter);
  m.runStarted();
  m.runEnded('compensated');
  m.runParked('compensate, then resume');
  m.reconciled('not_found_inconclusive');
  m.attempted('create_refund', 'stripe', 'UNKNOWN_OUTCOME', 2);
  m.attempted('update_order', 'store', null, 0);
  m.breaker('stripe:create_refund', 'open');
  m.breaker('smtp:send', 'half_open');
  m.handedOver('may_have_executed');
  m.handedOver('already_sent');
  m.handedOver('completed');
  m.admissionRefused();
  expect(meter.recorded).toEqual([
    { name: 'refunds_started_total', value: 1, tags: {} },
    { name: 'refunds_ended_total', value: 1, tags: { outcome: 'compensated' } },
    { name: 'refunds_parked_total', value: 1, tags: { verdict: 'compensate_then_resume' } },
    { name: 'refunds_reconciliation_results_total', value: 1, tags: { result: 'not_found_inconclusive' } },
    { name: 'refunds_step_attempts_total', value: 1, tags: { step: 'create_refund', outcome: 'unknown_outcome' } },
    { name: 'refunds_provider_requests_total', value: 2, tags: { boundary: 'stripe', outcome: 'unknown_outcome' } },
    // The store is no provider: its attempts count, no provider request does.
    { name: 'refunds_step_attempts_total', value: 1, tags: { step: 'update_order', outcome: 'ok' } },
    { name: 'refunds_breaker_state', value: 2, tags: { breaker: 'stripe:create_refund' } },
    { name: 'refunds_breaker_state', value: 1, tags: { breaker: 'smtp:send' } },
    { name: 'refunds_outbox_hand_overs_total', value: 1, tags: { outcome: 'unknown' } },
    { name: 'refunds_outbox_hand_overs_total', value: 1, tags: { outcome: 'already_sent' } },
    { name: 'refunds_outbox_hand_overs_total', value: 1, tags: { outcome: 'sent' } },
    { name: 'refunds_admission_refusals_total', value: 1, tags: {} },
  ]);
  // Prometheus's conventions: snake case, counters end in _total, the project's prefix on every one.
  for (const spec of Object.values(METRICS)) {
    expect(spec.name).toMatch(/^refunds_[a-z_]+$/);
    expect(spec.name.endsWith('_total')).toBe(spec.kind === 'counter');
  }
});

test("the attempt runner counts each attempt by step and outcome, and sets its breaker's state as it changes", async () => {
  const meter = recordingMeter();
  const env = new MockActivityEnvironment(
    { scheduledTimestampMs: Date.now(), scheduleToCloseTimeoutMs: 60_000, startToCloseTimeoutMs: 30_000 },
    { logger: new DefaultLogger('ERROR'), metricMeter: meter },
  );
  // No store: the attempt's ledger row goes nowhere.
  const nowhere = {
    startedAt: new Date().toISOString(),
    run: <T>(fn: () => Promise<T>) => fn(),
    recording: <T>(_end: unknown, fn: () => Promise<T>) => fn(),
    begun: async () => ({ id: 0, startedAt: '' }),
    finish: async () => undefined,
  };
  const log = { openAttempt: () => nowhere, attempts: async () => [] } as unknown as OperationLog;
  const breakers = new Breakers({
    enabled: true,
    failureThreshold: 1,
    windowMs: 60_000,
    cooldownMs: 1000,
    halfOpenProbes: 1,
  });
  const attempt = createAttemptRunner({ policy: DEFAULT_POLICY, log, breakers });
  const call = {
    step: 'notify_customer',
    key: 'k',
    operationId: 'op',
    boundary: 'smtp' as const,
    breaker: 'smtp:send',
  };
  const classify = (e: unknown) => e as Classified;

  await env.run(() => attempt(call, classify, async () => ({ sent: true })));
  const down = async () => {
    throw new Classified('TRANSIENT_DEPENDENCY', 'not_executed', 'connection_refused', 'refused', { health: true });
  };
  await env.run(() => attempt(call, classify, down)).catch(() => undefined);
  // Open now: the next attempt is refused without sending.
  await env.run(() => attempt(call, classify, async () => ({ sent: true }))).catch(() => undefined);

  // The SDK's activity meter adds its own labels (namespace, taskQueue, activityType) beside ours.
  const of = (name: string) => meter.recorded.filter((r) => r.name === name).map((r) => [r.value, r.tags]);
  expect(of(METRICS.breaker.name)).toEqual([
    [0, expect.objectContaining({ breaker: 'smtp:send' })],
    [2, expect.objectContaining({ breaker: 'smtp:send' })],
    [2, expect.objectContaining({ breaker: 'smtp:send' })],
  ]);
  expect(of(METRICS.attempts.name)).toEqual([
    [1, expect.objectContaining({ step: 'notify_customer', outcome: 'ok' })],
    [1, expect.objectContaining({ step: 'notify_customer', outcome: 'transient_dependency' })],
    [1, expect.objectContaining({ step: 'notify_customer', outcome: 'capacity' })],
  ]);
  // No transport reported a request here (the functions sent nothing): no provider request is counted.
  expect(of(METRICS.providerRequests.name)).toEqual([]);
});

test("activities over the worker's meter make each instrument once, and label it as the activity's own meter does", async () => {
  const worker = recordingMeter();
  const made: string[] = [];
  const counting = {
    ...worker,
    createCounter: (name: string) => (made.push(name), worker.createCounter(name)),
    createGauge: (name: string) => (made.push(name), worker.createGauge(name)),
  } as MetricMeter;
  const own = recordingMeter();
  const shared = activityMetrics(counting);
  const perActivity = activityMetrics();
  for (const activityType of ['createRefund', 'sendRefundNotice', 'createRefund']) {
    const env = new MockActivityEnvironment({ activityType }, { logger: new DefaultLogger('ERROR'), metricMeter: own });
    await env.run(async () => {
      for (const m of [shared(), perActivity()]) {
        m.attempted('create_refund', 'stripe', null, 1);
        m.breaker('stripe:create_refund', 'closed');
      }
    });
  }
  expect(made).toEqual([METRICS.attempts.name, METRICS.providerRequests.name, METRICS.breaker.name]);
  expect(worker.recorded).toEqual(own.recorded);
  expect(worker.recorded[3]!.tags).toEqual(
    expect.objectContaining({ activityType: 'sendRefundNotice', taskQueue: 'test', namespace: 'test' }),
  );
});

test("the store's statements and commits reach the meter added up once per turn of the event loop, every one counted", async () => {
  const meter = recordingMeter();
  const store = storeMetrics(meter);
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
  store.statement('begin');
  store.statement('select');
  store.statement('insert');
  store.statement('insert');
  store.statement('commit');
  store.commit();
  expect(meter.recorded).toEqual([]);
  await nextTurn();
  expect(meter.recorded).toEqual([
    { name: 'refunds_store_statements_total', value: 1, tags: { kind: 'begin' } },
    { name: 'refunds_store_statements_total', value: 1, tags: { kind: 'select' } },
    { name: 'refunds_store_statements_total', value: 2, tags: { kind: 'insert' } },
    { name: 'refunds_store_statements_total', value: 1, tags: { kind: 'commit' } },
    { name: 'refunds_store_commits_total', value: 1, tags: {} },
  ]);
  meter.recorded.length = 0;
  store.statement('update');
  store.commit();
  store.serializationRetry?.();
  await nextTurn();
  expect(meter.recorded).toEqual([
    { name: 'refunds_store_statements_total', value: 1, tags: { kind: 'update' } },
    { name: 'refunds_store_commits_total', value: 1, tags: {} },
    { name: 'refunds_store_serialization_retries_total', value: 1, tags: {} },
  ]);
});
