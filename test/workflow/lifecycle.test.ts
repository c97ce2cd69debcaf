// A run's life around its saga, with stubbed activities: cancellation at each stage, provider
// events (webhooks) as Signals, malformed ones ignored, and awaiting a refund the provider has not
// settled; and what the run's page in the Web UI says of it as it goes. The signed webhooks at a real
// receiver are the stack's (test/integration/webhook-receiver, provider-lifecycle, malformed-messages).
import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { decideCommand, decisionAddress, decisionUpdate, stepsQuery } from '../../src/contract';
import { verdict } from '../../src/reliability/verdict';
import { completed, stopped } from '../helpers/runs';
import { callNames, failure, type Override } from './fake-activities';
import { asInspected, startWorkflowTier, type WorkflowTier } from './tier';

let t: WorkflowTier;
beforeAll(async () => {
  t = await startWorkflowTier();
});
afterAll(async () => {
  await t?.close();
});

/** The run's current details, as the Web UI reads them (the SDK's built-in metadata Query). */
const currentDetails = async (handle: WorkflowHandle) =>
  (await handle.query<{ currentDetails: string }>('__temporal_workflow_metadata')).currentDetails;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const event = (refundId: string, refundStatus: string, id = `evt_${refundStatus}`) => ({
  id,
  type: `refund.${refundStatus === 'succeeded' ? 'updated' : refundStatus}`,
  refundId,
  refundStatus,
  created: 1_700_000_000,
  receivedAt: new Date().toISOString(),
});

describe('cancellation', () => {
  test('before its refund was sent: the run stops with nothing left for a person', async () => {
    // Loading the order takes a while (and then fails): the cancellation lands before anything is sent.
    const slowBegin: Override = () => new Promise((_, reject) => setTimeout(() => reject(new Error('too slow')), 1000));
    const { world, handle } = await t.start({ over: { beginOperation: slowBegin } });
    await sleep(300);
    await handle.cancel();
    await expect(handle.result()).rejects.toMatchObject({ cause: { name: 'CancelledFailure' } });
    expect(await handle.query(stepsQuery)).toMatchObject({
      status: 'stopped',
      outcome: { reason: expect.stringMatching(/the refund is not sent: nothing is left to do/) },
    });
    expect(await currentDetails(handle)).toMatch(/^\*\*stopped\*\*: cancelled .*the refund is not sent/);
    const described = await handle.describe();
    expect(described.status.name).toBe('CANCELLED');
    expect(described.searchAttributes).toMatchObject({ RefundStatus: ['stopped'], RefundNeedsAttention: [false] });
    expect(callNames(world, ['createRefund'])).toEqual([]);
  });

  test('while it compensates: the compensations are finished, not cut short, and the run ends compensated', async () => {
    let slowOnce = true;
    const slowCorrection: Override = async (_, next) => {
      if (!slowOnce) return next();
      slowOnce = false;
      await sleep(1500);
      throw failure('TRANSIENT_DEPENDENCY', 'not_executed', 'try_again', { retryable: true });
    };
    const { world, handle } = await t.start({
      world: (w) => (w.settlesAs = 'failed'),
      over: { sendRefundCorrection: slowCorrection },
    });
    for (let i = 0; i < 200 && (await handle.query(stepsQuery)).status !== 'compensating'; i++) await sleep(25);
    await handle.cancel();
    await expect(handle.result()).resolves.toMatchObject({ status: 'compensated' });
    const state = await handle.query(stepsQuery);
    expect(state.steps.find((s) => s.name === 'notify_customer')?.compensation).toMatchObject({
      status: 'completed',
      attempts: 2,
    });
    expect(state.steps.find((s) => s.name === 'update_order')?.compensation).toMatchObject({ status: 'completed' });
    expect(state.status).toBe('compensated');
    expect(world.orderUpdate?.revertedByKey).toEqual(expect.any(String));
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundStatus: ['compensated'],
      RefundNeedsAttention: [false],
    });
  });
});

describe('provider events', () => {
  test('malformed Signals are ignored and noted, never a failed workflow task; the run still takes a decision and completes', async () => {
    let down = true;
    const { handle } = await t.start({
      over: {
        checkCompletion: (_, next) =>
          down ? Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'server_error')) : next(),
      },
    });
    const { state } = await stopped(handle);
    const refundId = state.effect.refundId!;
    for (const bad of [
      null,
      42,
      {},
      { id: 7, type: null, refundId: ['re_1'], refundStatus: 1, created: 'yesterday', receivedAt: {} },
      event('re_not_this_runs', 'failed', 'evt_forged'),
    ]) {
      await handle.signal('providerEvent', bad as never);
    }
    for (let i = 0; i < 100 && (await handle.query(stepsQuery)).ignoredMessages.total < 5; i++) await sleep(25);
    const after = await handle.query(stepsQuery);
    expect(after.ignoredMessages.total).toBe(5);
    expect(after.ignoredMessages.latest.map((m) => m.reason)).toEqual([
      expect.stringMatching(/^malformed/),
      expect.stringMatching(/^malformed/),
      expect.stringMatching(/^malformed/),
      expect.stringMatching(/^malformed/),
      `names refund re_not_this_runs, not this run's refund ${refundId}`,
    ]);
    expect(after.providerEvents).toEqual([]);
    expect(after.status).toBe('needs_attention');
    const failedTasks = ((await handle.fetchHistory()).events ?? []).filter(
      (e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    );
    expect(failedTasks).toEqual([]);

    down = false;
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', by: 'ops', reason: 'reads are back' }],
    });
    completed(await handle.result());
  });

  test('a refund the provider has not settled is awaited; its webhook settles it without waiting for a poll', async () => {
    const { world, handle } = await t.start({ world: (w) => (w.refundStatus = 'pending') });
    for (let i = 0; i < 200 && (await handle.query(stepsQuery)).status !== 'awaiting_provider'; i++) await sleep(25);
    const waiting = await handle.query(stepsQuery);
    expect(waiting.awaitingProvider).toMatchObject({ refundId: world.refunds[0]!.refundId, polls: 0, settledBy: null });
    expect(waiting.steps.find((s) => s.name === 'completion_gate')).toMatchObject({ status: 'awaiting_provider' });

    world.refunds[0]!.status = 'succeeded';
    await handle.signal('providerEvent', event(world.refunds[0]!.refundId, 'succeeded'));
    completed(await handle.result());
    const done = await handle.query(stepsQuery);
    expect(done.awaitingProvider).toMatchObject({ polls: 0, settledBy: { kind: 'webhook', eventId: 'evt_succeeded' } });
    expect(done.providerEvents).toEqual([expect.objectContaining({ id: 'evt_succeeded', refundStatus: 'succeeded' })]);
    expect(callNames(world, ['checkCompletion'])).toHaveLength(2);
  });

  test("the provider's word that a parked run's refund failed is taken to the provider, and what it confirms is compensated", async () => {
    let down = true;
    const { world, handle } = await t.start({
      over: {
        checkCompletion: (_, next) =>
          down ? Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'server_error')) : next(),
      },
    });
    const { state } = await stopped(handle);
    down = false;
    world.settlesAs = 'failed';
    await handle.signal('providerEvent', event(state.effect.refundId!, 'failed'));
    await expect(handle.result()).resolves.toMatchObject({ status: 'compensated' });
    expect(callNames(world, ['sendRefundCorrection', 'revertRefund'])).toEqual([
      'sendRefundCorrection',
      'revertRefund',
    ]);
    expect(world.audit.some((a) => a.event === 'decision' && /refund\.failed .* says refund/.test(a.reason))).toBe(
      true,
    );
  });
});

test("the current details follow the run: parked with inspect's verdict and decide command, then completed; each activity has its summary", async () => {
  let down = true;
  const checkCompletion: Override = (_, next) =>
    down ? Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'server_error')) : next();
  const { handle } = await t.start({ over: { checkCompletion } });
  const { state } = await stopped(handle);
  const parked = await currentDetails(handle);
  // What inspect says of a parked run with no evidence against it: the run's own verdict, drawn by the same function.
  const inspected = verdict(asInspected(state));
  expect(parked.split('\n\n')).toEqual([
    `**needs_attention** at completion_gate: ${state.outcome!.reason}`,
    `**Verdict:** ${inspected.verdict}`,
    `**Next action:** ${inspected.nextAction}`,
    `**Who may decide:** ${inspected.decidedBy.join(', ')}`,
    `**Decide:** \`${decideCommand(handle.workflowId, 'retry-step:completion_gate', decisionAddress(state))}\``,
    `**Refund:** refunded (${state.effect.refundId}), operation ${state.operation!.operationId}`,
    `**Evidence:** \`npm run inspect -- ${handle.workflowId}\``,
  ]);

  down = false;
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'reads are back' }],
  });
  completed(await handle.result());
  const done = await currentDetails(handle);
  expect(done).toMatch(
    /^\*\*completed\*\*: every check of the completion gate passed\n\n\*\*Verdict:\*\* auto-retry is safe/,
  );
  expect(done).not.toContain('Decide');

  // Each scheduled activity carries its summary (user metadata): what it sends, to whom, under which key.
  const summaries = ((await handle.fetchHistory()).events ?? [])
    .map((e) => e.userMetadata?.summary)
    .filter((p): p is temporal.api.common.v1.IPayload => Boolean(p))
    .map((p) => defaultPayloadConverter.fromPayload<string>(p));
  const key = `${state.operation!.operationId}:create_refund`;
  expect(summaries).toEqual(
    expect.arrayContaining([
      expect.stringMatching(new RegExp(`^refund 1250 usd of pi_\\w+ at Stripe, idempotency key ${key}$`)),
      expect.stringMatching(
        /^email the refund notice \(1250 usd, re_\w+\) to the customer of order ord_\w+, Message-ID </,
      ),
      expect.stringMatching(/^completion gate: read refund re_\w+ at Stripe/),
    ]),
  );
  expect(summaries.join('\n')).not.toMatch(/@example/);
});
