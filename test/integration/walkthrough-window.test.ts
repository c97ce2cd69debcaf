// The walk-through's branches outside the provider's key window. The Stripe server here keeps a
// key's response for one second, as short as the client's timeout, so every resend falls outside
// it: nothing may be sent again until reconciliation proves no refund exists. A blind resend would
// create a second refund, and the last test shows the server would indeed do so.
import { randomUUID } from 'node:crypto';
import { TASK_QUEUE } from '../../src/contract';
import { refundWorkflow } from '../../src/workflows';
import { fewLookups, refund, startHarness, stopped, type Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ keyTtlMs: 1000, requestTimeoutMs: 1000, consistencyMs: 1500 });
});
afterAll(async () => {
  await h?.close();
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const request = (orderId: string) => ({ orderId, amount: 1250, currency: 'usd', requestedBy: 'test' });
const createKey = (orderId: string) => `refund:test:${orderId}:v1:create_refund`;
const posts = async (orderId: string) =>
  (await h.requests({ idempotencyKey: createKey(orderId) })).filter((r) => r.method === 'POST');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('committed, answer lost past the client timeout, list lagging: reconciliation waits out the lag and finds it; nothing is resent', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'stall', match: { idempotencyKey: createKey(order.id) }, delayMs: 2500 });
  await h.stripeFault({ kind: 'lagging_list', match: { idempotencyKey: createKey(order.id) }, lagMs: 2000 });
  const result = await refund(h.env.client, request(order.id));

  expect(await posts(order.id)).toHaveLength(1);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  const state = await h.state(result.workflowId);
  expect(state.reconciliation.history.map((l) => l.result)).toEqual(['not_found_inconclusive', 'completed']);
  expect(state.reconciliation.resubmissions).toBe(0);
  expect(state.steps[1].ledger[0]).toMatchObject({ outcome: 'UNKNOWN_OUTCOME', reason: 'client_timeout' });
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
});

test('confirmed not started: after the consistency window, absence is proven and the refund is sent again with the same key, once', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'fail_before_commit', match: { idempotencyKey: createKey(order.id) } });
  const result = await refund(h.env.client, request(order.id));

  const sent = await posts(order.id);
  expect(sent.map((r) => r.status)).toEqual([null, 200]);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  const state = await h.state(result.workflowId);
  expect(state.reconciliation.history.map((l) => l.result)).toEqual([
    'not_found_inconclusive',
    'not_started_confirmed',
  ]);
  expect(state.reconciliation.resubmissions).toBe(1);
  // The second send came only after the proof, never inside the uncertain stretch.
  const proof = await h.store.operations.get(`refund:test:${order.id}:v1`);
  expect(Date.parse(sent[1].at)).toBeGreaterThanOrEqual(Date.parse(proof!.absenceConfirmedAt!));
});

test('the same refund asked again long after its key expired, under another workflow id, replays its receipt and pays nothing', async () => {
  const order = await h.seedOrder(newOrderId());
  const first = await refund(h.env.client, request(order.id));
  await sleep(1500);
  const again = await h.env.client.workflow.execute(refundWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: `retention-${randomUUID()}`,
    args: [request(order.id)],
  });

  expect(again).toMatchObject({ status: 'completed', refund: { refundId: first.refund.refundId, replayed: true } });
  expect(await posts(order.id)).toHaveLength(1);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);

  // What the store's check prevents: the provider itself no longer deduplicates this key.
  const blind = await h.stripe.refunds.create(
    {
      payment_intent: order.paymentIntentId,
      amount: 1250,
      reason: 'requested_by_customer',
      metadata: { order_id: order.id, operation_id: `refund:test:${order.id}:v1` },
    },
    { idempotencyKey: createKey(order.id) },
  );
  expect(blind.id).not.toBe(first.refund.refundId);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(2);
});

test('an operation whose receipt was lost and whose key expired is never resent blind by a later run', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey(order.id) } });
  await h.failProviderReads(order.paymentIntentId);
  const first = (taskQueue: string) =>
    stopped(
      h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${order.id}-v1`,
        args: [request(order.id)],
      }),
    );
  await expect(h.withWorker({}, first, { policy: fewLookups(2) })).resolves.toMatchObject({
    status: 'needs_attention',
  });
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  await sleep(1200);

  const again = await h.env.client.workflow.execute(refundWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: `later-${randomUUID()}`,
    args: [request(order.id)],
  });
  expect(again.status).toBe('completed');
  expect(await posts(order.id)).toHaveLength(1);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  const state = await h.state(again.workflowId);
  expect(state.steps[1].ledger[0]).toMatchObject({
    outcome: 'UNKNOWN_OUTCOME',
    reason: 'outside_dedupe_window',
    transportRequests: 0,
  });
  expect(state.reconciliation.lastResult).toBe('completed');
});
