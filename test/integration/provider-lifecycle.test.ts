// The refund's asynchronous lifecycle on the real stack: the Stripe-compatible server settles
// pending refunds and fails pm_card_refundFail ones after a delay, and delivers signed webhooks to
// the receiver, which hands them to the refund's run, or to a follow-up run once it has finished.
// Effects are counted where they land: the server's request log, the store, the mailbox.
import type { WorkflowHandle } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import {
  checkoutStateQuery,
  checkoutWorkflowId,
  decisionUpdate,
  followUpWorkflowId,
  messageIdForKey,
  SEARCH_ATTRIBUTES,
  stepsQuery,
  TASK_QUEUE,
  type FollowUpResult,
} from '../../src/contract';
import { startRefund } from '../../src/client/refunds';
import { inspectRun } from '../../src/inspect/inspection';
import { compensationKeyOf } from '../../src/compensations/plan';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import { signatureHeader } from '../../tools/src/servers/stripe/events';
import { seedCart, setStock } from '../../tools/src/shop/carts';
import { startFollowUp } from '../../src/temporal/client';
import { startWebhookReceiver } from '../../src/webhooks/receiver';
import { checkoutWorkflow, refundWorkflow, type followUpWorkflow } from '../../src/workflows';
import { completed, startHarness, stopped, TEST_POLICY, type Harness } from '../helpers/harness';

/** Refunds change at the provider only when a test says so (h.settleRefund): nothing waits out a delay. */
const ON_DEMAND_MS = 3_600_000;
/** Polls far apart: a run that completes sooner completed on the webhook. */
const SLOW_POLLS: RecoveryPolicy = {
  ...TEST_POLICY,
  awaitProvider: { deadlineMs: 120_000, poll: { initialMs: 60_000, coefficient: 2, maxMs: 60_000 }, jitter: 0 },
};

let h: Harness;
let receiver: { url: string; close(): Promise<void> };
let endpointId: string;
const deps = { secret: 'whsec_pending' } as Parameters<typeof startWebhookReceiver>[0];
beforeAll(async () => {
  h = await startHarness({ policy: SLOW_POLLS, lifecycle: { settleDelayMs: ON_DEMAND_MS, failDelayMs: ON_DEMAND_MS } });
  Object.assign(deps, { stripe: h.stripe, store: h.store, temporal: h.env.client });
  receiver = await startWebhookReceiver(deps, { port: 0 });
  const endpoint = await h.stripe.webhookEndpoints.create({ url: receiver.url, enabled_events: ['*'] });
  endpointId = endpoint.id;
  deps.secret = endpoint.secret!;
});
afterAll(async () => {
  await receiver?.close();
  await h?.close();
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const until = async (what: string, check: () => Promise<boolean>, ms = 30_000) => {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100)))
    if (await check()) return;
  throw new Error(`timed out waiting for ${what}`);
};
/** The provider's reads of a run's refund: retrieves of it, and lists of its payment's refunds. */
const refundReads = async (refundId: string, orderId: string) => {
  const gets = async (filter: Parameters<Harness['requests']>[0]) =>
    (await h.requests(filter)).filter((r) => r.method === 'GET').length;
  const { paymentIntentId } = (await h.store.getOrder(orderId))!;
  return {
    retrieves: await gets({ path: `/v1/refunds/${refundId}` }),
    lists: await gets({ path: '/v1/refunds', paymentIntent: paymentIntentId }),
  };
};
const post = (body: string) =>
  fetch(receiver.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'stripe-signature': signatureHeader(body, deps.secret, Math.floor(Date.now() / 1000)),
    },
    body,
  });

/** The follow-up run of an operation, once the receiver has started it. */
async function followUp(operationId: string): Promise<WorkflowHandle<typeof followUpWorkflow>> {
  const handle = h.env.client.workflow.getHandle<typeof followUpWorkflow>(followUpWorkflowId(operationId));
  await until(`the follow-up of ${operationId}`, () =>
    handle.describe().then(
      () => true,
      () => false,
    ),
  );
  return handle;
}

test('a pending refund waits visibly for the provider and completes on its webhook, with no poll in between', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundPending' });
  const started = Date.now();
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });

  await until('awaiting_provider', async () => (await handle.query(stepsQuery)).status === 'awaiting_provider');
  const waiting = await handle.query(stepsQuery);
  expect(waiting.steps.find((s) => s.name === 'completion_gate')).toMatchObject({
    status: 'awaiting_provider',
    note: expect.stringMatching(/awaiting its webhook until/),
  });
  expect(waiting.awaitingProvider).toMatchObject({ refundId: waiting.effect.refundId, polls: 0, settledBy: null });
  expect((await handle.describe()).typedSearchAttributes.get(SEARCH_ATTRIBUTES.status)).toBe('awaiting_provider');
  expect(waiting.outcome).toBeNull();

  await h.settleRefund(waiting.effect.refundId!);
  const result = completed(await handle.result());
  // Settled long before the first poll would have been due (60 s).
  expect(Date.now() - started).toBeLessThan(30_000);
  const state = await handle.query(stepsQuery);
  expect(state.awaitingProvider).toMatchObject({
    polls: 0,
    settledBy: { kind: 'webhook', eventId: expect.stringMatching(/^evt_/) },
  });
  expect(state.providerEvents.map((e) => [e.type, e.refundStatus])).toEqual(
    expect.arrayContaining([['refund.updated', 'succeeded']]),
  );
  expect(state.steps.find((s) => s.name === 'completion_gate')).toMatchObject({ status: 'completed' });
  // No retrieve: the gate's first look listed the refund pending, and the webhook's signed event stood for it at the
  // second (whose list only checks that no other refund carries the operation id).
  expect(await refundReads(result.refund.refundId, order.id)).toEqual({ retrieves: 0, lists: 2 });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  expect(await h.store.operations.get(result.operationId)).toMatchObject({ status: 'completed' });
  expect((await handle.describe()).typedSearchAttributes.get(SEARCH_ATTRIBUTES.status)).toBe('completed');
  await h.recordHistory(handle.workflowId, 'refund-awaited-webhook');
});

test('a refund that fails after its run completed: a follow-up reverts the order and sends exactly one correction, however often and in whatever order the events come', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  const result = completed(await handle.result());
  const { operationId } = result;
  const refundId = result.refund.refundId;
  expect((await h.store.getOrder(order.id))!.refundedAmount).toBe(1250);
  await h.settleRefund(refundId);

  const follow = await followUp(operationId);
  const outcome: FollowUpResult = await follow.result();
  expect(outcome).toMatchObject({
    status: 'compensated',
    originalWorkflowId: handle.workflowId,
    refund: { refundId, status: 'failed' },
  });
  expect(outcome.compensations.map((c) => [c.step, c.key, c.status])).toEqual([
    ['notify_customer', `${operationId}:notify_customer:compensate`, 'completed'],
    ['update_order', `${operationId}:update_order:compensate`, 'completed'],
  ]);
  const desc = await follow.describe();
  expect(desc.typedSearchAttributes.get(SEARCH_ATTRIBUTES.followUpOf)).toBe(handle.workflowId);
  expect(desc.typedSearchAttributes.get(SEARCH_ATTRIBUTES.status)).toBe('compensated');
  await h.recordHistory(follow.workflowId, 'follow-up-compensated');

  const settled = async () => {
    const orderNow = (await h.store.getOrder(order.id))!;
    expect(orderNow).toMatchObject({ refundedAmount: 0, status: 'paid' });
    expect(await h.store.appliedRefund(operationId)).toMatchObject({
      revertedByKey: `${operationId}:update_order:compensate`,
    });
    expect(await h.store.operations.get(operationId)).toMatchObject({ status: 'failed' });
    const mail = await h.messages({ to: order.customerEmail });
    expect(mail).toHaveLength(2);
    expect(mail.filter((m) => /^Correction: /.test(m.subject))).toHaveLength(1);
    expect(await h.store.getNotification(`${operationId}:notify_customer:compensate`)).toMatchObject({
      status: 'sent',
      attempts: 1,
    });
    return orderNow.version;
  };
  const version = await settled();

  // Every event for the refund, three times each, newest first (the failure before the creation): nothing changes twice.
  await until('all four events', async () => (await h.store.providerEvents.forOperation(operationId)).length >= 4);
  const { events } = (await (await fetch(`${h.stripeUrl}/_events?object=${refundId}`)).json()) as {
    events: { id: string; type: string; created: number }[];
  };
  expect(events.length).toBeGreaterThanOrEqual(4);
  for (let round = 0; round < 3; round++) {
    for (const e of [...events].reverse()) expect((await post(JSON.stringify(e))).status).toBe(200);
  }
  expect(await settled()).toBe(version);
  const records = await h.store.providerEvents.forOperation(operationId);
  expect(records.every((r) => r.deliveries >= 4)).toBe(true);
  const runs = [];
  for await (const w of h.env.client.workflow.list({ query: `WorkflowId = '${followUpWorkflowId(operationId)}'` }))
    runs.push(w.runId);
  expect(runs).toHaveLength(1);

  // The original run's evidence leads to the follow-up, and no longer claims a refund that stands.
  const inspected = await inspectRun(h.env.client, h.sources, 'test', handle.workflowId);
  expect(inspected.facts).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        id: `temporal:${followUpWorkflowId(operationId)}`,
        says: expect.stringMatching(/compensated/),
      }),
    ]),
  );
  expect(inspected.inferences).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ claim: 'nothing was refunded', status: 'confirmed' }),
      expect.objectContaining({ claim: expect.stringMatching(/order was restored/), status: 'confirmed' }),
    ]),
  );
  expect(inspected).toMatchObject({
    verdict: 'compensate, then resume',
    nextAction: expect.stringMatching(/failed the refund after this run completed, and follow-up:.* compensated it/),
  });
  const ofFollowUp = await inspectRun(h.env.client, h.sources, 'test', followUpWorkflowId(operationId));
  expect(ofFollowUp).toMatchObject({
    operationId,
    orderId: order.id,
    steps: null,
    stateUnavailable: expect.stringMatching(new RegExp(`follow-up run of ${handle.workflowId}`)),
    verdict: 'compensate, then resume',
  });
});

test("a checkout's refund of its charge that fails after the checkout ended is handed to a person, never called compensated", async () => {
  const cartId = `cart_${randomUUID().slice(0, 8)}`;
  const email = `${cartId}@example.com`;
  await setStock(h.store, `${cartId}-a`, 5);
  await seedCart(h.store, {
    id: cartId,
    customerEmail: email,
    currency: 'usd',
    amount: 4200,
    items: [{ sku: `${cartId}-a`, quantity: 1 }],
  });
  // The receipt is refused for good: the run parks at it, and a cancellation gives the checkout back.
  await h.mailFault({
    kind: 'reply',
    stage: 'rcpt',
    code: 550,
    message: '5.1.1 no such user',
    match: { recipient: email },
  });
  const handle = await h.env.client.workflow.start(checkoutWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: checkoutWorkflowId(cartId),
    args: [{ cartId, paymentMethod: 'pm_card_refundFail', requestedBy: 'test' }],
  });
  await until('the run to park', async () => (await handle.query(checkoutStateQuery)).status === 'needs_attention');
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow();
  const given = await handle.query(checkoutStateQuery);
  expect(given).toMatchObject({ status: 'compensated' });
  const refund = given.steps[1]!.compensation!.output as { refundId: string; operationId: string };
  await h.settleRefund(refund.refundId);

  const outcome: FollowUpResult = await (await followUp(refund.operationId)).result();
  expect(outcome).toMatchObject({
    status: 'needs_attention',
    originalWorkflowId: handle.workflowId,
    refund: { refundId: refund.refundId, status: 'failed' },
    compensations: [],
    reason: expect.stringContaining('the customer paid and was not refunded'),
  });
  expect(await h.messages({ to: email })).toEqual([]);
  await h.recordHistory(followUpWorkflowId(refund.operationId), 'follow-up-needs-attention');
});

test("a receiver that is down while the refund fails gets the events later through the server's retries, and nothing is lost", async () => {
  const port = Number(new URL(receiver.url).port);
  await receiver.close();
  try {
    const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
    const { handle } = await startRefund(h.env.client, {
      orderId: order.id,
      amount: 700,
      currency: 'usd',
      requestedBy: 'test',
    });
    const { operationId, refund } = completed(await handle.result());
    await h.settleRefund(refund.refundId);
    // The failure's deliveries are refused while the receiver is down.
    const failedDeliveries = async () => {
      const { deliveries } = (await (await fetch(`${h.stripeUrl}/_webhooks`)).json()) as {
        deliveries: { eventId: string; attempts: number; status: string }[];
      };
      const { events } = (await (await fetch(`${h.stripeUrl}/_events?object=${refund.refundId}`)).json()) as {
        events: { id: string; type: string }[];
      };
      const failure = events.find((e) => e.type === 'refund.failed');
      return deliveries.some((d) => d.eventId === failure?.id && d.attempts >= 1 && d.status !== 'delivered');
    };
    await until('a refused delivery of refund.failed', failedDeliveries, 20_000);
    expect(await h.store.providerEvents.forOperation(operationId)).toHaveLength(0);
    expect((await h.store.getOrder(order.id))!.refundedAmount).toBe(700);

    receiver = await startWebhookReceiver(deps, { port });
    const outcome = await (await followUp(operationId)).result();
    expect(outcome).toMatchObject({ status: 'compensated' });
    expect((await h.store.getOrder(order.id))!.refundedAmount).toBe(0);
    expect((await h.messages({ to: order.customerEmail })).filter((m) => /^Correction: /.test(m.subject))).toHaveLength(
      1,
    );
    await until(
      'every event of the refund',
      async () => (await h.store.providerEvents.forOperation(operationId)).length >= 4,
      30_000,
    );
  } finally {
    // Later tests need a receiver on this port.
    if (
      !(await fetch(receiver.url, { method: 'GET' }).then(
        () => true,
        () => false,
      ))
    )
      receiver = await startWebhookReceiver(deps, { port });
  }
});

test("a run parked for a person when its refund fails is not left waiting: the provider's failure is confirmed and compensated without asking", async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  // The customer's mailbox refuses the notice for good: the run parks at notify_customer with the refund standing.
  await h.mailFault({
    kind: 'reply',
    stage: 'rcpt',
    code: 550,
    message: '5.1.1 no such user',
    match: { recipient: order.customerEmail },
    count: 1,
  });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 600,
    currency: 'usd',
    requestedBy: 'test',
  });
  const parked = await stopped(handle);
  expect(parked).toMatchObject({
    status: 'needs_attention',
    state: { outcome: { failedStep: 'notify_customer' }, effect: { status: 'refunded' } },
  });
  expect((await h.store.getOrder(order.id))!.refundedAmount).toBe(600);

  // Then the provider fails the refund; its webhook wakes the parked run.
  await h.settleRefund(parked.state.effect.refundId!);
  const result = await handle.result();
  expect(result).toMatchObject({ status: 'compensated', failedStep: 'completion_gate' });
  const state = await handle.query(stepsQuery);
  expect(state.effect).toMatchObject({ status: 'failed' });
  expect(state.steps.find((s) => s.name === 'update_order')!.compensation).toMatchObject({
    status: 'completed',
    key: `${result.operationId}:update_order:compensate`,
  });
  expect((await h.store.getOrder(order.id))!).toMatchObject({ refundedAmount: 0, status: 'paid' });
  // The customer was never told of the refund, so no correction either.
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(0);
  const trail = await h.store.operations.auditTrail(result.operationId!);
  expect(trail.find((a) => a.event === 'decision')).toMatchObject({
    detail: { decision: 'provider_event', by: 'provider' },
  });
});

test('a notice whose hand-over is unknown is never compensated silently: the run parks with the reason, and a correction goes out only on a decision', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const notice = messageIdForKey(`refund:test:${order.id}:v1:notify_customer`);
  // The mail server stores the notice and the connection drops before its 250: the customer very likely has it.
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 650,
    currency: 'usd',
    requestedBy: 'test',
  });
  const parked = await stopped(handle);
  expect(parked).toMatchObject({
    status: 'needs_attention',
    state: { outcome: { failedStep: 'notify_customer' }, effect: { status: 'refunded' } },
  });

  // Then the provider fails the refund; its webhook wakes the parked run, which undoes what it can.
  await h.settleRefund(parked.state.effect.refundId!);
  await until(
    'the refund failed and the order reverted',
    async () => (await h.store.getOrder(order.id))!.refundedAmount === 0,
    30_000,
  );
  const after = await stopped(handle);
  const corrections = async () =>
    (await h.messages({ to: order.customerEmail })).filter((m) => /^Correction: /.test(m.subject));
  expect(await h.messages({ messageId: notice })).toHaveLength(1);
  expect(after.status).not.toBe('compensated');
  expect(after).toMatchObject({
    status: 'needs_attention',
    state: { effect: { status: 'failed' }, outcome: { reason: expect.stringContaining(notice) } },
  });
  expect(await corrections()).toHaveLength(0);
  expect((await handle.describe()).typedSearchAttributes.get(SEARCH_ATTRIBUTES.needsAttention)).toBe(true);

  // A person finds the notice in the mailbox and decides to compensate; a lead approves: one correction, then compensated.
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'compensate', by: 'ops', reason: `${notice} is in the mailbox` }],
  });
  await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'correct it' }] });
  await expect(handle.result()).resolves.toMatchObject({ status: 'compensated' });
  expect(await corrections()).toHaveLength(1);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('a correction whose outcome is unknown is never held over by a cancellation: the run stays quarantined and says a correction may have gone out', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const operationId = `refund:test:${order.id}:v1`;
  const notice = messageIdForKey(`${operationId}:notify_customer`);
  const correction = messageIdForKey(compensationKeyOf('notify_customer', operationId));
  // The notice and, later, its correction are stored by the mail server, and each connection drops before its 250.
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: correction } });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 660,
    currency: 'usd',
    requestedBy: 'test',
  });
  await h.settleRefund((await stopped(handle)).state.effect.refundId!);
  await until(
    'the refund failed and the order reverted',
    async () => (await h.store.getOrder(order.id))!.refundedAmount === 0,
    30_000,
  );
  // Held, and parked again: the step table shows the hold a moment before the run parks for the decision.
  await until(
    'the notice held and the run parked',
    async () => {
      const state = await handle.query(stepsQuery);
      const held = state.steps.find((s) => s.name === 'notify_customer')!.compensation?.status === 'held';
      return held && state.status === 'needs_attention' && state.parked !== null;
    },
    30_000,
  );

  // A person decides to compensate, a lead approves: the correction goes out and its answer is lost too.
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'compensate', by: 'ops', reason: `${notice} is in the mailbox` }],
  });
  await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'correct it' }] });
  const correctionOf = async () =>
    (await handle.query(stepsQuery)).steps.find((s) => s.name === 'notify_customer')!.compensation;
  await until('the correction unknown', async () => (await correctionOf())?.status === 'unknown', 30_000);
  expect(await h.messages({ messageId: correction })).toHaveLength(1);

  // An operator cancels the parked run: the correction that probably reached the customer is not forgotten.
  await handle.cancel();
  await expect(handle.result()).rejects.toMatchObject({ cause: { name: 'CancelledFailure' } });
  const state = await handle.query(stepsQuery);
  expect(state.status).toBe('needs_attention');
  expect(state.outcome!.reason).not.toMatch(/no correction was sent/);
  // The reason names the refund's failure, not the receipt the run was created with.
  expect(state.outcome!.reason).toMatch(/failed refund re_\w+ after accepting it \(failed\)/);
  expect(await correctionOf()).toMatchObject({
    status: 'unknown',
    key: compensationKeyOf('notify_customer', operationId),
  });
  expect((await handle.describe()).typedSearchAttributes.get(SEARCH_ATTRIBUTES.needsAttention)).toBe(true);
  expect(
    (await h.messages({ to: order.customerEmail })).filter((m) => /^Correction: /.test(m.subject)).length,
  ).toBeLessThanOrEqual(1);

  // The provider's failure reaches a follow-up after the run ended: it plans from the same records and says the same.
  const failure = state.providerEvents.find((e) => e.refundStatus === 'failed')!;
  await startFollowUp(h.env.client, { operationId, originalWorkflowId: handle.workflowId, event: failure });
  const outcome = await (await followUp(operationId)).result();
  expect(outcome.status).toBe('needs_attention');
  expect(outcome.reason).not.toMatch(/no correction was sent/);
  expect(outcome.compensations).toContainEqual(
    expect.objectContaining({
      step: 'notify_customer',
      key: compensationKeyOf('notify_customer', operationId),
      status: 'unknown',
    }),
  );
  expect(
    (await h.messages({ to: order.customerEmail })).filter((m) => /^Correction: /.test(m.subject)).length,
  ).toBeLessThanOrEqual(1);
});

test('a run cancelled while it holds an unacted refund failure hands it to the follow-up, which reverts the order and corrects the email', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  // The gate cannot read the provider: the run parks at completion_gate with the notice sent and the refund standing.
  await h.failProviderReads(order.paymentIntentId);
  const quick: RecoveryPolicy = {
    ...SLOW_POLLS,
    rules: SLOW_POLLS.rules.map((r) => (r.code === 'TRANSIENT_DEPENDENCY' ? { ...r, maxAttempts: 1 } : r)),
    decisions: { ...SLOW_POLLS.decisions, needApproval: ['abandon'] },
  };
  const outcome = await h.withWorker(
    {},
    async (taskQueue) => {
      const handle = await h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${order.id}-v1`,
        args: [{ orderId: order.id, amount: 800, currency: 'usd', requestedBy: 'test' }],
      });
      const parked = await stopped(handle);
      expect(parked).toMatchObject({
        status: 'needs_attention',
        state: { outcome: { failedStep: 'completion_gate' }, effect: { status: 'refunded' } },
      });
      // The provider answers again (the follow-up reads the refund); the parked run does not look meanwhile.
      await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
      // A proposal waits for a second person: the provider's failure does not wake the run meanwhile.
      await expect(
        handle.executeUpdate(decisionUpdate, {
          args: [{ decision: 'abandon', by: 'ops', reason: 'support handles it' }],
        }),
      ).resolves.toMatchObject({ outcome: 'awaiting_approval' });
      await h.settleRefund(parked.state.effect.refundId!);
      await until(
        'refund.failed reached the run',
        async () => (await handle.query(stepsQuery)).providerEvents.some((e) => e.refundStatus === 'failed'),
        30_000,
      );
      expect((await handle.query(stepsQuery)).status).toBe('awaiting_approval');
      await handle.cancel();
      await expect(handle.result()).rejects.toMatchObject({ cause: { name: 'CancelledFailure' } });
      const { operationId } = (await handle.query(stepsQuery)).operation!;
      return { operationId, followUp: await (await followUp(operationId)).result() };
    },
    { policy: quick },
  );
  expect(outcome.followUp).toMatchObject({ status: 'compensated', refund: { status: 'failed' } });
  expect((await h.store.getOrder(order.id))!).toMatchObject({ refundedAmount: 0, status: 'paid' });
  expect(await h.store.appliedRefund(outcome.operationId)).toMatchObject({
    revertedByKey: `${outcome.operationId}:update_order:compensate`,
  });
  const mail = await h.messages({ to: order.customerEmail });
  expect(mail).toHaveLength(2);
  expect(mail.filter((m) => /^Correction: /.test(m.subject))).toHaveLength(1);
});

test("a second refund carrying the operation id outweighs the failure of the run's own: the run parks with the evidence and undoes nothing", async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  // The notice is refused for good: the run parks at notify_customer with its refund standing.
  await h.mailFault({
    kind: 'reply',
    stage: 'rcpt',
    code: 550,
    message: '5.1.1 no such user',
    match: { recipient: order.customerEmail },
    count: 1,
  });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 700,
    currency: 'usd',
    requestedBy: 'test',
  });
  const parked = await stopped(handle);
  expect(parked).toMatchObject({ status: 'needs_attention', state: { outcome: { failedStep: 'notify_customer' } } });
  const { operationId } = parked.state.operation!;
  const own = parked.state.effect.refundId!;
  // Someone else refunds under the same operation id; it succeeds (for now) while the run's own refund fails.
  const other = await h.stripe.refunds.create({
    payment_intent: order.paymentIntentId,
    amount: 700,
    metadata: { operation_id: operationId },
  });
  expect(other.status).toBe('succeeded');

  // Then the provider fails the run's own refund; its webhook wakes the run, and the gate looks.
  await h.settleRefund(own);
  await until(
    'the gate looked again',
    async () => (await handle.query(stepsQuery)).outcome?.failedStep === 'completion_gate',
    30_000,
  );
  const after = await stopped(handle);
  expect(after.status).toBe('needs_attention');
  expect(after.state.outcome).toMatchObject({
    failedStep: 'completion_gate',
    reason: expect.stringMatching(/single_refund: 2 refund\(s\) with this operation id/),
  });
  expect(after.state.outcome!.reason).toContain(other.id);
  expect(after.state.outcome!.reason).toContain(own);
  // Both refunds named for what they are: the run's own failed, the other carries the operation id.
  expect(after.state.outcome!.reason).not.toMatch(/The refund stands/);
  expect(after.state.outcome!.reason).toMatch(
    new RegExp(`refund ${own} is failed, and ${other.id} carries the operation id too`),
  );
  expect(after.state.steps.every((s) => !s.compensation || s.compensation.kind !== 'compensation')).toBe(true);
  expect((await h.store.getOrder(order.id))!.refundedAmount).toBe(700);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(0);
  expect(await h.store.operations.get(operationId)).not.toMatchObject({ status: 'failed' });
});

test('the follow-up, too, undoes nothing when a second refund carries the operation id beside the failed one', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 900,
    currency: 'usd',
    requestedBy: 'test',
  });
  const { operationId, refund } = completed(await handle.result());
  // Someone else refunds under the same operation id; it succeeds (for now) when the run's own refund fails.
  const other = await h.stripe.refunds.create({
    payment_intent: order.paymentIntentId,
    amount: 900,
    metadata: { operation_id: operationId },
  });
  await h.settleRefund(refund.refundId);
  const outcome: FollowUpResult = await (await followUp(operationId)).result();
  expect(outcome).toMatchObject({ status: 'needs_attention', compensations: [] });
  expect(outcome.reason).toContain(other.id);
  expect((await h.store.getOrder(order.id))!.refundedAmount).toBe(900);
  expect((await h.messages({ to: order.customerEmail })).filter((m) => /^Correction: /.test(m.subject))).toHaveLength(
    0,
  );
});

test("with webhooks off, polling completes a pending refund within the policy's deadline; past the deadline it parks for a person", async () => {
  await h.stripe.webhookEndpoints.del(endpointId);
  const fastPolls = (deadlineMs: number): RecoveryPolicy => ({
    ...TEST_POLICY,
    awaitProvider: { deadlineMs, poll: { initialMs: 1000, coefficient: 2, maxMs: 2000 }, jitter: 0 },
  });

  const start = async (taskQueue: string) => {
    const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundPending' });
    return h.env.client.workflow.start(refundWorkflow, {
      taskQueue,
      workflowId: `refund-${order.id}-v1`,
      args: [{ orderId: order.id, amount: 900, currency: 'usd', requestedBy: 'test' }],
    });
  };

  const polled = await h.withWorker(
    {},
    async (taskQueue) => {
      const handle = await start(taskQueue);
      await until(
        'a poll that saw it pending',
        async () => ((await handle.query(stepsQuery)).awaitingProvider?.polls ?? 0) >= 1,
      );
      await h.settleRefund((await handle.query(stepsQuery)).effect.refundId!);
      const result = completed(await handle.result());
      return { result, state: await handle.query(stepsQuery) };
    },
    { policy: fastPolls(60_000) },
  );
  expect(polled.state.providerEvents).toEqual([]);
  expect(polled.state.awaitingProvider).toMatchObject({ settledBy: { kind: 'poll' } });
  expect(polled.state.awaitingProvider!.polls).toBeGreaterThanOrEqual(1);
  // A look a poll: each a list that showed the refund, none a retrieve.
  expect(await refundReads(polled.result.refund.refundId, polled.result.orderId)).toEqual({
    retrieves: 0,
    lists: 1 + polled.state.awaitingProvider!.polls,
  });

  const parked = await h.withWorker(
    {},
    async (taskQueue) => {
      const handle = await start(taskQueue);
      const run = await stopped(handle);
      // Once the provider has settled it, a person's retry-step looks again, waiting afresh.
      await h.settleRefund(run.state.effect.refundId!);
      await handle.executeUpdate(decisionUpdate, {
        args: [{ decision: 'retry-step', by: 'ops', reason: 'the bank says it is through' }],
      });
      return { ...run, result: await handle.result() };
    },
    { policy: fastPolls(1000) },
  );
  expect(parked.status).toBe('needs_attention');
  // Parked while pending: its last look saw the refund pending (the reason says so).
  expect(parked.state.awaitingProvider!.polls).toBeGreaterThanOrEqual(1);
  expect(parked.state.outcome).toMatchObject({
    failedStep: 'completion_gate',
    reason: expect.stringMatching(/still pending at the provider .* awaitProvider deadline/),
  });
  expect(parked.state.awaitingProvider).toMatchObject({ settledBy: { kind: 'deadline' } });
  expect(parked.state.effect).toMatchObject({ status: 'refunded' });
  expect(parked.result).toMatchObject({ status: 'completed' });
});
