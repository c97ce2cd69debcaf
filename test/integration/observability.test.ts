// What a worker tells its operators: JSON log lines that carry the workflow id, the operation id
// and the attempt (pino, as the worker's logger), and OpenTelemetry spans for the run and each
// activity attempt, exported by Temporal's interceptors.
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Writable } from 'node:stream';
import { Classified, createAttemptRunner } from '../../src/activities/attempt';
import { createLogger } from '../../src/observability/logging';
import { startTracing } from '../../src/observability/tracing';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { openStore, type SqlOrderStore } from '../../src/store';
import { completed, startHarness, type Harness } from '../helpers/harness';
import { startRefund } from '../../src/client/refunds';

describe('JSON logs', () => {
  let store: SqlOrderStore;
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

describe('traces', () => {
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
    expect(spans.map((s) => s.name)).toEqual(
      expect.arrayContaining([
        'RunActivity:beginOperation',
        'RunActivity:createRefund',
        'RunActivity:applyRefund',
        'RunActivity:sendRefundNotice',
        'RunActivity:checkCompletion',
      ]),
    );
    expect(spans[0]!.resource.attributes['service.name']).toBe('refunds-test');
    expect(spans[0]!.attributes.run_id).toBe((await handle.describe()).runId);
  });
});
