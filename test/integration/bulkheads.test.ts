// Bulkheads and admission control on a real server: side effects and reconciliation run in pools
// of their own, a backlog of new refunds over the limit gets the documented refusal, and a parked
// run's decision still goes through while the side-effect pool is swamped.
import { WorkflowNotFoundError } from '@temporalio/client';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { AdmissionRejectedError } from '../../src/client/admission';
import { backlogs } from '../../src/temporal/client';
import { outcomeOf } from '../../src/client/outcome';
import { startRefund } from '../../src/client/refunds';
import { decisionUpdate, refundWorkflowId, stepsQuery, type WorkerPool } from '../../src/contract';
import { createRefundWorker } from '../../src/worker-pools';
import { runUntil } from '../helpers/workers';
import { Worker } from '@temporalio/worker';
import type { temporal } from '@temporalio/proto';
import { refundWorkflow } from '../../src/workflows';
import { startHarness, stopped, type Harness } from '../helpers/harness';
import { nodeArgs } from '../helpers/compiled';

const run = promisify(execFile);
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const request = (orderId: string) => ({ orderId, amount: 1250, currency: 'usd', requestedBy: 'test' });
const workers = (taskQueue: string, pools?: WorkerPool[]) =>
  createRefundWorker({
    connection: h.env.nativeConnection,
    namespace: h.namespace,
    taskQueue,
    activities: h.activities,
    workflowBundle: h.workflowBundle,
    dataConverter: h.dataConverter,
    pools,
  });

/** Each activity the run scheduled, with the task queue it was scheduled on. */
const scheduledOf = (events: temporal.api.history.v1.IHistoryEvent[]) =>
  Object.fromEntries(
    events.flatMap((e) => {
      const a = e.activityTaskScheduledEventAttributes;
      return a ? [[a.activityType!.name!, a.taskQueue!.name!]] : [];
    }),
  );

test("the provider effects are scheduled in the effects pool, the gate's first look rides in the notice's; the store steps run as local activities", async () => {
  const order = await h.seedOrder(newOrderId());
  const { handle } = await startRefund(h.env.client, request(order.id));
  expect((await handle.result()).status).toBe('completed');
  const events = (await handle.fetchHistory()).events ?? [];
  expect(scheduledOf(events)).toEqual({ createRefund: 'refunds-effects', sendRefundNotice: 'refunds-effects' });
  // The order update rides in the refund's receipt transaction: no local activity of its own.
  expect(localActivities(events)).toEqual(['beginOperation']);
  // The 1.0 baseline asks no patch: a run leaves no patch marker.
  expect(patchMarkers(events)).toEqual([]);
  // The whole run: 5 for any workflow, 6 for each of the 2 activities, 1 local activity marker, and 1 upsert of the run's
  // status (completed): startRefund started it running, so its first workflow task does not say so again (a run started
  // another way does: the next test but one, 20 events).
  expect(
    events[0]!.workflowExecutionStartedEventAttributes?.searchAttributes?.indexedFields?.RefundStatus,
  ).toBeDefined();
  expect(
    events.filter(
      (e) => e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.RefundStatus,
    ),
  ).toHaveLength(1);
  expect(events).toHaveLength(5 + 6 * 2 + 1 + 1);
});

test("the completion gate's own looks (a pending refund's) are scheduled in the reconcile pool", async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundPending' });
  const { handle } = await startRefund(h.env.client, request(order.id));
  for (let i = 0; i < 100 && (await handle.query(stepsQuery)).status !== 'awaiting_provider'; i++)
    await new Promise((r) => setTimeout(r, 100));
  await h.settleRefund((await handle.query(stepsQuery)).effect.refundId!);
  expect((await handle.result()).status).toBe('completed');
  expect(scheduledOf((await handle.fetchHistory()).events ?? [])).toEqual({
    createRefund: 'refunds-effects',
    sendRefundNotice: 'refunds-effects',
    checkCompletion: 'refunds-reconcile',
  });
});

test('a caller waiting for a run (outcomeOf) leaves its history as short as no caller would, even before a worker picks it up', async () => {
  // Runs started with no worker polling yet, each waited for at once (as `npm run refund` and startRefund's callers do).
  const taskQueue = `waited-${randomUUID().slice(0, 8)}`;
  const waits = await Promise.all(
    [1, 2].map(async () => {
      const order = await h.seedOrder(newOrderId());
      const handle = await h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: refundWorkflowId(order.id, 1),
        args: [request(order.id)],
      });
      return { handle, outcome: outcomeOf(handle, 100) };
    }),
  );
  await new Promise((r) => setTimeout(r, 1000));
  const events = await h.withWorker(
    {},
    () =>
      Promise.all(
        waits.map(async ({ handle, outcome }) => {
          expect(await outcome).toMatchObject({ kind: 'result', result: { status: 'completed' } });
          return (await handle.fetchHistory()).events?.length;
        }),
      ),
    undefined,
    taskQueue,
  );
  // A Query waiting for the first workflow task made the worker complete it early and take another (more events):
  // the caller watches the run's RefundStatus (describe, answered by the server) and asks no Query until it parks.
  // Started without RefundStatus (not by startRefund), each run upserts it in its first workflow task: 20, not 19.
  expect(events).toEqual([20, 20]);
});

test('runs whose local steps are queried while they run, or outlive their workflow task (the worker heartbeats it), replay', async () => {
  const slow =
    <I, O>(ms: number, fn: (input: I) => Promise<O>) =>
    async (input: I): Promise<O> => {
      await new Promise((r) => setTimeout(r, ms));
      return fn(input);
    };
  const slowSteps = (ms: number) => ({
    beginOperation: slow(ms, h.activities.beginOperation),
  });
  // Several at once, each queried all along (as `npm run refund` and the bench wait for a run: each query is an
  // activation of its own), the way a worker under load sees them.
  const runMany = (n: number, ms: number, workflowTaskTimeout: string, name: string) =>
    h.withWorker(slowSteps(ms), (taskQueue) =>
      Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const order = await h.seedOrder(newOrderId());
          const handle = await h.env.client.workflow.start(refundWorkflow, {
            taskQueue,
            workflowId: refundWorkflowId(order.id, 1),
            args: [request(order.id)],
            workflowTaskTimeout,
          });
          let done = false;
          const querying = (async () => {
            while (!done) await handle.query(stepsQuery).catch(() => undefined);
          })();
          const result = await handle.result();
          done = true;
          await querying;
          expect(result.status).toBe('completed');
          return { workflowId: `${name}-${i}`, history: await handle.fetchHistory() };
        }),
      ),
    );
  const queried = await runMany(6, 200, '10s', 'refund-local-steps-queried');
  // A 1 s workflow task: each 1.5 s local activity outlives it, and the worker completes the task to keep it alive.
  const heartbeat = await runMany(6, 1500, '1s', 'refund-local-steps-heartbeat');
  for (const { history } of [...queried, ...heartbeat])
    expect(localActivities(history.events ?? [])).toEqual(['beginOperation']);
  // More workflow tasks than the run needs: the heartbeats.
  for (const { history } of heartbeat)
    expect((history.events ?? []).filter((e) => e.workflowTaskCompletedEventAttributes).length).toBeGreaterThan(4);
  const replayed = Worker.runReplayHistories({ workflowBundle: h.workflowBundle, dataConverter: h.dataConverter }, [
    ...queried,
    ...heartbeat,
  ]);
  const failed: string[] = [];
  for await (const r of replayed) if (r.error) failed.push(`${r.workflowId}: ${r.error.message}`);
  expect(failed).toEqual([]);
});

/** A local activity leaves one marker, named by its activity type in the marker's details. */
function localActivities(events: temporal.api.history.v1.IHistoryEvent[]): string[] {
  return events.flatMap((e) => {
    const m = e.markerRecordedEventAttributes;
    if (m?.markerName !== 'core_local_activity') return [];
    const data = m.details?.data?.payloads?.[0]?.data;
    return data ? [(JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string }).activity_type] : [];
  });
}

function patchMarkers(events: temporal.api.history.v1.IHistoryEvent[]): string[] {
  return events.flatMap((e) => {
    const m = e.markerRecordedEventAttributes;
    if (m?.markerName !== 'core_patch') return [];
    const data = m.details?.['patch-data']?.payloads?.[0]?.data;
    return data ? [(JSON.parse(Buffer.from(data).toString('utf8')) as { id: string }).id] : [];
  });
}

test('over the backlog limit a new refund is refused as documented, a repeated one still attaches, and a parked run is decided', async () => {
  const taskQueue = `bulkhead-${randomUUID().slice(0, 8)}`;
  const maxBacklog = 3;
  // A run parks at its completion gate (the provider's refund list fails), with every pool up.
  const parkedOrder = await h.seedOrder(newOrderId());
  await h.failProviderReads(parkedOrder.paymentIntentId);
  const parked = await runUntil(
    await workers(taskQueue),
    (async () => {
      const { handle } = await startRefund(h.env.client, request(parkedOrder.id), taskQueue, maxBacklog);
      expect((await stopped(handle)).status).toBe('needs_attention');
      return handle;
    })(),
  );

  // Now the side-effect pool is gone (or swamped): new refunds pile up in its queue.
  const waiting: string[] = [];
  try {
    await runUntil(
      await workers(taskQueue, ['workflows', 'reconcile']),
      (async () => {
        for (let i = 0; i < 5; i++) {
          const order = await h.seedOrder(newOrderId());
          waiting.push(
            (
              await h.env.client.workflow.start(refundWorkflow, {
                taskQueue,
                workflowId: refundWorkflowId(order.id, 1),
                args: [request(order.id)],
              })
            ).workflowId,
          );
        }
        // The server's backlog figure lags by a few seconds.
        for (let i = 0; i < 100 && !(await backlogs(h.env.client, taskQueue)).some((b) => b.tasks > 3); i++)
          await new Promise((r) => setTimeout(r, 200));

        const refused = await h.seedOrder(newOrderId());
        const error = await startRefund(h.env.client, request(refused.id), taskQueue, maxBacklog).catch(
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(AdmissionRejectedError);
        expect((error as Error).message).toMatch(
          new RegExp(
            `^refund refund-${refused.id}-v1 not started: task queue ${taskQueue}-effects has [4-9] tasks waiting \\(the oldest for \\d+ s\\), over the limit of 3 \\(ADMISSION_MAX_BACKLOG\\); the workers are behind\\. Nothing was done`,
          ),
        );
        await expect(
          h.env.client.workflow.getHandle(refundWorkflowId(refused.id, 1)).describe(),
        ).rejects.toBeInstanceOf(WorkflowNotFoundError);
        // The same refusal from the CLI, with its exit status (75: try again later).
        const cli = await run(
          process.execPath,
          nodeArgs('cli/refund.ts', '--order', refused.id, '--amount', '1250', '--requested-by', 'test'),
          {
            env: { ...h.cliEnv(), TASK_QUEUE: taskQueue, ADMISSION_MAX_BACKLOG: '3' },
          },
        ).catch((e: { code: number; stderr: string }) => e);
        expect(cli).toMatchObject({
          code: 75,
          stderr: expect.stringContaining(
            `refund: refund refund-${refused.id}-v1 not started: task queue ${taskQueue}-effects has`,
          ),
        });

        // A repeated request finds its run, whatever the backlog: it starts nothing new.
        const again = await startRefund(
          h.env.client,
          request(waiting[0]!.replace(/^refund-|-v1$/g, '')),
          taskQueue,
          maxBacklog,
        );
        expect(again.workflowId).toBe(waiting[0]);

        // The decision runs in the workflow and reconciliation pools, which the backlog does not touch.
        await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
        await parked.executeUpdate(decisionUpdate, {
          args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
        });
        expect(await parked.result()).toMatchObject({ status: 'completed' });
      })(),
    );
  } finally {
    await Promise.all(waiting.map((id) => h.env.client.workflow.getHandle(id).terminate('test over')));
  }
  expect(await h.ledger(parkedOrder.paymentIntentId)).toHaveLength(1);
});
