// Scheduled occurrences on a real dev server's Schedules: overlap, backfill, re-run occurrences
// that start and send nothing twice (counted at the Stripe server and the mailbox), the sweep,
// and a 02:30 New York schedule across both DST changes, read from `npm run schedule -- describe`.
import type { Client, ScheduleOverlapPolicy } from '@temporalio/client';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseDefinitions, type ScheduleDefinitionInput } from '../../src/schedules/definitions';
import { applySchedule, triggerSchedule } from '../../src/schedules/schedules';
import { stepsQuery, TASK_QUEUE } from '../../src/contract';
import { findTool } from '../../tools/src/stack/tools';
import { refundWorkflow, type BatchResult, type DigestResult } from '../../src/workflows';
import { fewLookups, startHarness, stopped, type Harness } from '../helpers/harness';
import { nodeArgs } from '../helpers/compiled';

const execFileAsync = promisify(execFile);
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const client = (): Client => h.env.client;

/** A definition that never fires on its own in a test's lifetime: its occurrences come from triggers and backfills. */
function definition(
  over: Partial<ScheduleDefinitionInput> & Pick<ScheduleDefinitionInput, 'workflow'>,
): ScheduleDefinitionInput {
  return {
    id: `t-${randomUUID().slice(0, 8)}`,
    version: 1,
    description: 'test schedule',
    args: {},
    calendar: { minute: 17, hour: 3, dayOfMonth: 29 },
    timeZone: 'UTC',
    overlap: 'SKIP',
    catchupWindowMs: 60_000,
    pauseOnFailure: false,
    taskQueue: TASK_QUEUE,
    ...over,
  };
}

async function apply(def: ScheduleDefinitionInput): Promise<string> {
  const [parsed] = parseDefinitions([def], 'test');
  await applySchedule(client(), parsed!);
  return parsed!.id;
}

/** The occurrences a schedule has started, as visibility lists them, once there are `expected` (or after a while). */
async function occurrences(
  scheduleId: string,
  expected: number,
  settleMs = 0,
): Promise<{ workflowId: string; start: Date; close?: Date }[]> {
  let found: { workflowId: string; start: Date; close?: Date }[] = [];
  for (let i = 0; i < 150; i++) {
    found = [];
    for await (const w of client().workflow.list({ query: `TemporalScheduledById = '${scheduleId}'` }))
      found.push({ workflowId: w.workflowId, start: w.startTime, close: w.closeTime });
    if (found.length >= expected && found.every((f) => f.close)) break;
    await sleep(200);
  }
  if (settleMs) await sleep(settleMs);
  return found.sort((a, b) => a.start.getTime() - b.start.getTime());
}

async function result<T>(workflowId: string): Promise<T> {
  return (await client().workflow.getHandle(workflowId).result()) as T;
}

/** Re-runs a finished occurrence from its first workflow task, as `temporal workflow reset` does: same identity, everything executed again. */
async function rerun(workflowId: string): Promise<string> {
  const { stdout } = await execFileAsync(
    findTool('temporal'),
    [
      'workflow',
      'reset',
      '--workflow-id',
      workflowId,
      '--type',
      'FirstWorkflowTask',
      '--reason',
      'redeliver the occurrence',
      '--address',
      h.env.address,
      '--namespace',
      h.namespace,
      '-o',
      'json',
    ],
    { encoding: 'utf8' },
  );
  const runId = (JSON.parse(stdout) as { runId?: string }).runId;
  expect(runId).toBeTruthy();
  return runId!;
}

describe('overlap', () => {
  /** Two triggers while a slow occurrence runs: what the overlap policy makes of them. */
  async function triggersDuringARun(overlap: ScheduleOverlapPolicy) {
    // The occurrence's first activity holds until both triggers were sent: they surely come while it runs.
    let entered!: () => void;
    const running = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const heldTake = async () => {
      entered();
      await released;
      return [];
    };
    return h.withWorker({ takeQueued: heldTake }, async (taskQueue) => {
      const id = await apply(definition({ workflow: 'batchRefundsWorkflow', args: { limit: 1 }, overlap, taskQueue }));
      await triggerSchedule(client(), id);
      await running;
      await triggerSchedule(client(), id);
      await sleep(1100); // a trigger in the same second would share the first one's workflow id
      await triggerSchedule(client(), id);
      await sleep(500);
      release();
      return occurrences(id, overlap === 'SKIP' ? 1 : 2, 3000);
    });
  }

  test('SKIP: triggers while an occurrence runs start nothing', async () => {
    const runs = await triggersDuringARun('SKIP');
    expect(runs).toHaveLength(1);
  });

  test('BUFFER_ONE: one more occurrence, started after the running one closed', async () => {
    const runs = await triggersDuringARun('BUFFER_ONE');
    expect(runs).toHaveLength(2);
    expect(runs[1]!.start.getTime()).toBeGreaterThanOrEqual(runs[0]!.close!.getTime());
  });
});

test('with no worker across several fire times, SKIP leaves one occurrence waiting, and it runs when a worker returns', async () => {
  const taskQueue = `offline-${randomUUID().slice(0, 8)}`;
  const id = await apply(definition({ workflow: 'sweepWorkflow', args: { maxRuns: 1, waitMs: 0 }, taskQueue }));
  // Three fire times, a second apart, while nothing polls the queue: the first occurrence waits, the others are skipped.
  for (let i = 0; i < 3; i++) {
    await triggerSchedule(client(), id);
    await sleep(1100);
  }
  const described = await client().schedule.getHandle(id).describe();
  expect(described.info.runningActions).toHaveLength(1);
  const [waiting] = described.info.runningActions;
  const report = await h.withWorker(
    {},
    () => result<{ occurrenceId: string }>(waiting!.workflow.workflowId),
    {},
    taskQueue,
  );
  expect(report.occurrenceId).toMatch(new RegExp(`^${id}@`));
  expect(await occurrences(id, 1, 500)).toHaveLength(1);
});

test('a backfill over a window yields exactly its occurrences, each with its own id', async () => {
  const id = await apply(
    definition({ workflow: 'sweepWorkflow', args: { maxRuns: 1, waitMs: 0 }, calendar: { minute: 0, hour: '*' } }),
  );
  await client()
    .schedule.getHandle(id)
    .backfill({
      start: new Date('2026-11-01T00:00:00Z'),
      end: new Date('2026-11-01T03:30:00Z'),
      overlap: 'BUFFER_ALL',
    });
  const runs = await occurrences(id, 4, 1000);
  expect(runs.map((r) => r.workflowId)).toEqual(['00', '01', '02', '03'].map((hh) => `${id}-2026-11-01T${hh}:00:00Z`));
  const ids = await Promise.all(
    runs.map((r) => result<{ occurrenceId: string }>(r.workflowId).then((x) => x.occurrenceId)),
  );
  expect(ids).toEqual(['00', '01', '02', '03'].map((hh) => `${id}@2026-11-01T${hh}:00:00.000Z`));
});

test('a batch occurrence starts each queued refund once; re-run, it starts and refunds nothing twice, whatever the ids', async () => {
  const [a, b, c, d] = await Promise.all([
    h.seedOrder(newOrderId()),
    h.seedOrder(newOrderId()),
    h.seedOrder(newOrderId()),
    h.seedOrder(newOrderId()),
  ]);
  const request = (orderId: string) => ({
    orderId,
    amount: 1250,
    currency: 'usd',
    reason: 'requested_by_customer' as const,
    requestedBy: 'test',
    operationVersion: 1,
  });
  for (const o of [a!, b!, c!, d!]) await h.store.queue.enqueue(request(o.id), 'test');
  // c's refund already ran, started by hand under another workflow id: the operation is the same.
  await client().workflow.execute(refundWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: `by-hand-${c!.id}`,
    args: [request(c!.id)],
  });
  // d's business key is held by a run for another amount: the queued request is not that run, and stays queued.
  await client().workflow.execute(refundWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: `refund-${d!.id}-v1`,
    args: [{ ...request(d!.id), amount: 900 }],
  });

  const id = await apply(definition({ workflow: 'batchRefundsWorkflow', args: { limit: 10 } }));
  await triggerSchedule(client(), id);
  const [occurrence] = await occurrences(id, 1);
  const first = await result<BatchResult>(occurrence!.workflowId);
  await h.recordHistory(occurrence!.workflowId, 'batch-started');
  expect(first.started.sort()).toEqual([a!, b!, c!].map((o) => `refund-${o.id}-v1`).sort());
  expect(first.notStarted).toEqual([
    {
      workflowId: `refund-${d!.id}-v1`,
      reason: expect.stringMatching(/already exists with amount 900: this request needs a new operation version/),
    },
  ]);
  // It can never start as it is: refused for good, so that it does not hold up the queue.
  const dRefused = (await h.store.queue.list({ orderId: d!.id }))[0];
  expect(dRefused).toMatchObject({
    status: 'refused',
    lastError: expect.stringMatching(/already exists with amount 900/),
  });
  for (const o of [a!, b!, c!])
    await expect(client().workflow.getHandle(`refund-${o.id}-v1`).result()).resolves.toMatchObject({
      status: 'completed',
    });

  await rerun(occurrence!.workflowId);
  const again = await result<BatchResult>(occurrence!.workflowId);
  expect(again).toMatchObject({ occurrenceId: first.occurrenceId, taken: 0, started: [], notStarted: [] });
  expect(await h.ledger(d!.paymentIntentId)).toHaveLength(1);
  for (const o of [a!, b!, c!]) {
    expect(await h.ledger(o.paymentIntentId)).toHaveLength(1);
    expect(await h.messages({ to: o.customerEmail })).toHaveLength(1);
  }
  expect(
    (await h.store.queue.list({ status: 'started' })).filter((q) => [a!.id, b!.id, c!.id].includes(q.request.orderId)),
  ).toHaveLength(3);
});

test('a digest occurrence sends one email; re-run, it sends no second', async () => {
  const id = await apply(definition({ workflow: 'digestWorkflow', args: { max: 10 } }));
  await triggerSchedule(client(), id);
  const [occurrence] = await occurrences(id, 1);
  const first = await result<DigestResult>(occurrence!.workflowId);
  expect(first).toMatchObject({ key: expect.stringMatching(new RegExp(`^digest:${id}@`)), alreadySent: false });
  await rerun(occurrence!.workflowId);
  const again = await result<DigestResult>(occurrence!.workflowId);
  expect(again).toMatchObject({ key: first.key, messageId: first.messageId, alreadySent: true });
  expect(await h.messages({ messageId: first.messageId })).toHaveLength(1);
  expect((await h.messages({ to: 'ops@test.local' })).filter((m) => m.messageId === first.messageId)).toHaveLength(1);
});

test('the sweep reconciles a parked run whose unknown refund the provider had in fact completed', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({
    kind: 'drop_after_commit',
    match: { idempotencyKey: `refund:test:${order.id}:v1:create_refund` },
  });
  await h.failProviderReads(order.paymentIntentId);
  await h.withWorker(
    {},
    async (taskQueue) => {
      const handle = await client().workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${order.id}-v1`,
        args: [{ orderId: order.id, amount: 1250, currency: 'usd', requestedBy: 'test' }],
      });
      const { state } = await stopped(handle);
      expect(state).toMatchObject({ status: 'needs_attention', effect: { status: 'unknown' } });
      await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });

      const id = await apply(definition({ workflow: 'sweepWorkflow', args: { maxRuns: 50, waitMs: 30_000 } }));
      await triggerSchedule(client(), id);
      const [occurrence] = await occurrences(id, 1);
      const report = await result<{ reconciled: string[] }>(occurrence!.workflowId);
      expect(report.reconciled).toContain(handle.workflowId);
      await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
      expect((await handle.query(stepsQuery)).decisions).toEqual([
        expect.objectContaining({ decision: 'reconcile', by: 'sweep' }),
      ]);
    },
    { policy: fewLookups(2) },
  );
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
});

test('a 02:30 America/New_York schedule across both DST changes, as describe reports it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'schedules-'));
  const file = path.join(dir, 'schedules.json');
  const id = `dst-${randomUUID().slice(0, 8)}`;
  const daily = (startAt: string) =>
    definition({
      id,
      workflow: 'digestWorkflow',
      calendar: { minute: 30, hour: 2 },
      timeZone: 'America/New_York',
      startAt,
    });
  const env = { ...process.env, ...h.cliEnv(), SCHEDULES_FILE: file };
  const cli = (...args: string[]) =>
    execFileAsync(process.execPath, nodeArgs('cli/schedule.ts', ...args), { encoding: 'utf8', env });
  const nextTimes = async (startAt: string) => {
    fs.writeFileSync(file, JSON.stringify([daily(startAt)]));
    await cli('apply');
    return (JSON.parse((await cli('describe', id, '--json')).stdout) as { next: string[] }).next.slice(0, 4);
  };
  // Spring forward, 2027-03-14: 02:00 EST becomes 03:00 EDT, so 02:30 does not exist that day, and there is no occurrence.
  expect(await nextTimes('2027-03-12T12:00:00Z')).toEqual([
    '2027-03-13 02:30 EST (2027-03-13T07:30:00.000Z)',
    '2027-03-15 02:30 EDT (2027-03-15T06:30:00.000Z)',
    '2027-03-16 02:30 EDT (2027-03-16T06:30:00.000Z)',
    '2027-03-17 02:30 EDT (2027-03-17T06:30:00.000Z)',
  ]);
  // Fall back, 2027-11-07: 02:00 EDT becomes 01:00 EST; 02:30 happens once.
  expect(await nextTimes('2027-11-05T12:00:00Z')).toEqual([
    '2027-11-06 02:30 EDT (2027-11-06T06:30:00.000Z)',
    '2027-11-07 02:30 EST (2027-11-07T07:30:00.000Z)',
    '2027-11-08 02:30 EST (2027-11-08T07:30:00.000Z)',
    '2027-11-09 02:30 EST (2027-11-09T07:30:00.000Z)',
  ]);
});
