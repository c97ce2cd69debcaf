// A cancel that lands while a parked run does its bookkeeping (who may decide, the park's audit, the audit of the
// provider's failure or of a person's decision) still ends the run through its one cancellation path: a `cancelled`
// entry on the audit trail, what can be compensated compensated, the provider's unacted failure handed to the
// follow-up. The bookkeeping is held by the worker (the real activity, started only when the test lets it go), the
// failure comes through the Stripe server's webhook, and effects are counted in the store and the mailbox.
import type { WorkflowHandle } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import type { RefundActivities } from '../../src/activities';
import {
  decisionUpdate,
  followUpWorkflowId,
  messageIdForKey,
  SEARCH_ATTRIBUTES,
  stepsQuery,
  type FollowUpResult,
} from '../../src/contract';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import { startWebhookReceiver } from '../../src/webhooks/receiver';
import { refundWorkflow } from '../../src/workflows';
import { startHarness, stopped, TEST_POLICY, type Harness } from '../helpers/harness';

/** Refunds change at the provider only when a test says so (h.settleRefund); polls far apart. */
const ON_DEMAND_MS = 3_600_000;
const POLICY: RecoveryPolicy = {
  ...TEST_POLICY,
  awaitProvider: { deadlineMs: 120_000, poll: { initialMs: 60_000, coefficient: 2, maxMs: 60_000 }, jitter: 0 },
  // The gate gives up on an unreadable provider at once: the run parks at completion_gate.
  rules: TEST_POLICY.rules.map((r) => (r.code === 'TRANSIENT_DEPENDENCY' ? { ...r, maxAttempts: 1 } : r)),
};

let h: Harness;
let receiver: { url: string; close(): Promise<void> };
const deps = { secret: 'whsec_cancel' } as Parameters<typeof startWebhookReceiver>[0];
beforeAll(async () => {
  h = await startHarness({ policy: POLICY, lifecycle: { settleDelayMs: ON_DEMAND_MS, failDelayMs: ON_DEMAND_MS } });
  Object.assign(deps, { stripe: h.stripe, store: h.store, temporal: h.env.client });
  receiver = await startWebhookReceiver(deps, { port: 0 });
  const endpoint = await h.stripe.webhookEndpoints.create({ url: receiver.url, enabled_events: ['*'] });
  deps.secret = endpoint.secret!;
});
afterAll(async () => {
  await receiver?.close();
  await h?.close();
});

const until = async (what: string, check: () => Promise<boolean>, ms = 30_000) => {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100)))
    if (await check()) return;
  throw new Error(`timed out waiting for ${what}`);
};
const corrections = async (to: string) =>
  (await h.messages({ to })).filter((m) => /^Correction: /.test(m.subject)).length;

type Activity = 'recordOutcome' | 'decisionPolicy' | 'sendRefundCorrection';
type Input = Parameters<RefundActivities['recordOutcome']>[0];

/** The first call of `activity` that `match` picks waits until released, then runs the real activity. */
function holdOnce(activity: Activity, match: (input: Input) => boolean) {
  let reached!: () => void;
  let release!: () => void;
  const held = { reached: new Promise<void>((r) => (reached = r)), released: new Promise<void>((r) => (release = r)) };
  let taken = false;
  const real = h.activities[activity] as (...args: unknown[]) => Promise<unknown>;
  const wrapped = async (...args: unknown[]) => {
    if (!taken && match(args[0] as Input)) {
      taken = true;
      reached();
      await held.released;
    }
    return real(...args);
  };
  return { override: { [activity]: wrapped } as Partial<RefundActivities>, reached: held.reached, release };
}

/** A run parked at completion_gate (the provider unreadable), its refund standing and its notice sent. */
async function startParkable(taskQueue: string, orderId: string, amount: number) {
  return h.env.client.workflow.start(refundWorkflow, {
    taskQueue,
    workflowId: `refund-${orderId}-v1`,
    args: [{ orderId, amount, currency: 'usd', requestedBy: 'test' }],
  });
}

const providerReadsBack = () => fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });

/** The provider fails the refund; its webhook reaches the run (held in its bookkeeping, it records the event). */
async function providerFails(handle: WorkflowHandle<typeof refundWorkflow>) {
  const state = await handle.query(stepsQuery);
  await h.settleRefund(state.effect.refundId!);
  await until('refund.failed reached the run', async () =>
    (await handle.query(stepsQuery)).providerEvents.some((e) => e.refundStatus === 'failed'),
  );
}

async function followUpResult(operationId: string): Promise<FollowUpResult> {
  const handle = h.env.client.workflow.getHandle(followUpWorkflowId(operationId));
  await until(`the follow-up of ${operationId}`, () =>
    handle.describe().then(
      () => true,
      () => false,
    ),
  );
  return (await handle.result()) as FollowUpResult;
}

/** Cancels the run while its bookkeeping is held, and lets that go only once the run has closed: a stuck pool. */
async function cancelWhileHeld(handle: WorkflowHandle<typeof refundWorkflow>, release: () => void) {
  await handle.cancel();
  try {
    await expect(handle.result()).rejects.toMatchObject({ cause: { name: 'CancelledFailure' } });
  } finally {
    release();
  }
}

/** What every case ends with: a cancelled run whose audit says so, and the failure compensated by the follow-up. */
async function expectCancelledAndCompensated(handle: WorkflowHandle<typeof refundWorkflow>, orderId: string) {
  const { operationId } = (await handle.query(stepsQuery)).operation!;
  const trail = await h.store.operations.auditTrail(operationId);
  expect(trail.filter((a) => a.event === 'run_stopped' && a.detail.status === 'cancelled')).toHaveLength(1);
  expect(await followUpResult(operationId)).toMatchObject({ status: 'compensated', refund: { status: 'failed' } });
  const order = (await h.store.getOrder(orderId))!;
  expect(order).toMatchObject({ refundedAmount: 0, status: 'paid' });
  expect(await corrections(order.customerEmail)).toBe(1);
}

/** Each case's run is recorded for the replay suite (RECORD_HISTORY=1) under its name. */
const parkBookkeeping: [string, Activity, (i: Input) => boolean, string][] = [
  ['reads who may decide', 'decisionPolicy', () => true, 'refund-cancelled-reading-deciders'],
  ['records its park', 'recordOutcome', (i) => i.event === 'run_parked', 'refund-cancelled-while-parking'],
];

test.each(parkBookkeeping)(
  'a run cancelled while it %s, with the provider failing the refund meanwhile, still ends through its cancellation path',
  async (_, activity, match, recording) => {
    const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`, { paymentMethod: 'pm_card_refundFail' });
    await h.failProviderReads(order.paymentIntentId);
    const hold = holdOnce(activity, match);
    await h.withWorker(hold.override, async (taskQueue) => {
      const handle = await startParkable(taskQueue, order.id, 700);
      await hold.reached;
      await providerReadsBack();
      await providerFails(handle);
      await cancelWhileHeld(handle, hold.release);
      await h.recordHistory(handle.workflowId, recording);
      await expectCancelledAndCompensated(handle, order.id);
    });
  },
);

test("a run cancelled while it records the provider's failure that woke it hands that failure to the follow-up", async () => {
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`, { paymentMethod: 'pm_card_refundFail' });
  await h.failProviderReads(order.paymentIntentId);
  const hold = holdOnce(
    'recordOutcome',
    (i) => i.event === 'decision' && (i.detail as { decision?: string }).decision === 'provider_event',
  );
  await h.withWorker(hold.override, async (taskQueue) => {
    const handle = await startParkable(taskQueue, order.id, 710);
    expect(await stopped(handle)).toMatchObject({
      status: 'needs_attention',
      state: { effect: { status: 'refunded' } },
    });
    await providerReadsBack();
    await providerFails(handle);
    await hold.reached;
    await cancelWhileHeld(handle, hold.release);
    await expectCancelledAndCompensated(handle, order.id);
  });
});

test("a run cancelled while it records a person's decision, the provider failing the refund meanwhile, hands the failure to the follow-up", async () => {
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`, { paymentMethod: 'pm_card_refundFail' });
  await h.failProviderReads(order.paymentIntentId);
  const hold = holdOnce('recordOutcome', (i) => i.event === 'decision');
  await h.withWorker(hold.override, async (taskQueue) => {
    const handle = await startParkable(taskQueue, order.id, 720);
    expect(await stopped(handle)).toMatchObject({
      status: 'needs_attention',
      state: { effect: { status: 'refunded' } },
    });
    await providerReadsBack();
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', step: 'completion_gate', by: 'ops', reason: 'the provider answers again' }],
    });
    await hold.reached;
    await providerFails(handle);
    await cancelWhileHeld(handle, hold.release);
    await expectCancelledAndCompensated(handle, order.id);
  });
});

const heldCorrection: [string, 'compensate' | 'abandon', string, number][] = [
  // Approved, not yet carried out: the cancellation sends the held correction as the person approved.
  ['compensate', 'compensate', 'compensated', 1],
  // What was done stays done, as the person decided: nothing more is undone, nothing sent.
  ['abandon', 'abandon', 'abandoned', 0],
];

test.each(heldCorrection)(
  'a run cancelled while it records the %s decision, taken and not yet carried out, ends as that decision says',
  async (_, decision, status, correctionsSent) => {
    const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`, { paymentMethod: 'pm_card_refundFail' });
    const notice = messageIdForKey(`refund:test:${order.id}:v1:notify_customer`);
    // The notice is stored and its answer lost: when the provider fails the refund, its correction is held for a person.
    await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
    const hold = holdOnce(
      'recordOutcome',
      (i) => i.event === 'decision' && (i.detail as { decision?: string }).decision === decision,
    );
    await h.withWorker(hold.override, async (taskQueue) => {
      const handle = await startParkable(taskQueue, order.id, 730);
      await stopped(handle);
      await h.settleRefund((await handle.query(stepsQuery)).effect.refundId!);
      await until('the correction held and the run parked again', async () => {
        const state = await handle.query(stepsQuery);
        const held = state.steps.find((s) => s.name === 'notify_customer')!.compensation?.status === 'held';
        return held && state.status === 'needs_attention' && state.parked !== null;
      });
      await handle.executeUpdate(decisionUpdate, {
        args: [{ decision, by: 'ops', reason: `${notice} is in the mailbox` }],
      });
      if (decision === 'compensate')
        await handle.executeUpdate(decisionUpdate, {
          args: [{ decision: 'approve', by: 'lead', reason: 'correct it' }],
        });
      await hold.reached;
      await cancelWhileHeld(handle, hold.release);
      const state = await handle.query(stepsQuery);
      expect(state).toMatchObject({ status, effect: { status: 'failed' } });
      expect((await handle.describe()).typedSearchAttributes.get(SEARCH_ATTRIBUTES.needsAttention)).not.toBe(true);
      const trail = await h.store.operations.auditTrail(state.operation!.operationId);
      expect(trail.filter((a) => a.event === 'run_stopped' && a.detail.status === 'cancelled')).toHaveLength(1);
    });
    expect((await h.store.getOrder(order.id))!).toMatchObject({ refundedAmount: 0, status: 'paid' });
    expect(await corrections(order.customerEmail)).toBe(correctionsSent);
  },
);

test('a follow-up cancelled while it compensates finishes its compensations: the order reverted, one correction', async () => {
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`, { paymentMethod: 'pm_card_refundFail' });
  // Its first compensation, the correction, is held: a cancel then would leave the order's revert never scheduled.
  const hold = holdOnce('sendRefundCorrection', () => true);
  await h.withWorker(hold.override, async (taskQueue) => {
    const run = await startParkable(taskQueue, order.id, 740);
    const result = await run.result();
    expect(result.status).toBe('completed');
    deps.taskQueue = taskQueue;
    try {
      await h.settleRefund((await run.query(stepsQuery)).effect.refundId!);
      await hold.reached;
    } finally {
      deps.taskQueue = undefined;
    }
    const follow = h.env.client.workflow.getHandle(followUpWorkflowId(result.operationId!));
    await follow.cancel();
    setTimeout(hold.release, 1000);
    const outcome = await follow.result().catch((err: unknown) => err);
    await h.recordHistory(follow.workflowId, 'follow-up-cancelled-while-compensating');
    expect(outcome).toMatchObject({ status: 'compensated' });
  });
  expect((await h.store.getOrder(order.id))!).toMatchObject({ refundedAmount: 0, status: 'paid' });
  expect(await corrections(order.customerEmail)).toBe(1);
});
