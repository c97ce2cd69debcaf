// What a stopped run says of its refund comes from the operation's record (every send, its outcome,
// any proof of absence), never from the last attempt alone: a resend that was refused after a send
// whose outcome stayed open must not make the run say that nothing was refunded.
import { randomUUID } from 'node:crypto';
import { TASK_QUEUE, type RefundRunState } from '../../src/contract';
import { refundWorkflow } from '../../src/workflows';
import { startHarness, stopped, type Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  // The provider's list may lag this long after a send: a lookup inside it proves nothing.
  h = await startHarness({ consistencyMs: 30_000 });
});
afterAll(async () => {
  await h?.close();
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const request = (orderId: string) => ({
  orderId,
  amount: 1250,
  currency: 'usd',
  requestedBy: 'test',
  operationVersion: 1,
});
const opId = (orderId: string) => `refund:test:${orderId}:v1`;
const createKey = (orderId: string) => `${opId(orderId)}:create_refund`;
const start = (orderId: string) =>
  stopped(
    h.env.client.workflow.start(refundWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: `refund-${orderId}-v1`,
      args: [request(orderId)],
    }),
  );

const posts = async (orderId: string) =>
  (await h.requests({ idempotencyKey: createKey(orderId) })).filter((r) => r.method === 'POST');
async function firstSend(orderId: string): Promise<void> {
  for (let i = 0; i < 600 && (await posts(orderId)).length === 0; i++) await new Promise((r) => setTimeout(r, 25));
}

/** The run's own words about the refund: it may exist (or exists), and nobody is told nothing was refunded. */
function saysRefundMayExist(state: RefundRunState): void {
  expect(state.effect.status).toBe('unknown');
  expect(state.outcome?.reason).not.toMatch(/[Nn]othing was refunded/);
  expect(state.outcome?.reason).toMatch(/may exist/);
  expect(state.parked).toMatchObject({
    verdict: 'stop and hand to a person',
    nextAction: expect.stringMatching(/^reconcile operation/),
  });
}

test('a resend refused with 429s after a lost answer and a lagging list: one refund, and the run says it may exist', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey(order.id) } });
  await h.stripeFault({ kind: 'lagging_list', match: { idempotencyKey: createKey(order.id) }, lagMs: 60_000 });
  // The lookup is held a while, so that the 429s are armed after the first send and before the resend.
  await h.stripeFault({ kind: 'slow', match: { method: 'GET', paymentIntent: order.paymentIntentId }, delayMs: 500 });
  const parked = start(order.id);
  await firstSend(order.id);
  await h.stripeFault({
    kind: 'rate_limit',
    match: { idempotencyKey: createKey(order.id) },
    retryAfterSeconds: 0,
    count: 5,
  });
  const { status, state } = await parked;
  expect((await posts(order.id)).map((r) => r.status)).toEqual([null, 429, 429, 429, 429, 429]);

  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(status).toBe('needs_attention');
  expect(state.reconciliation).toMatchObject({ resubmissions: 1 });
  expect(state.lastFailure).toMatchObject({ step: 'create_refund', code: 'RATE_LIMIT', certainty: 'not_executed' });
  saysRefundMayExist(state);

  // A second run of the same operation, whose open send came from the first run, says the same.
  await h.env.client.workflow.getHandle(`refund-${order.id}-v1`).terminate('a second run of the same operation');
  await h.stripeFault({
    kind: 'rate_limit',
    match: { idempotencyKey: createKey(order.id) },
    retryAfterSeconds: 0,
    count: 5,
  });
  const again = await start(order.id);
  expect(again.status).toBe('needs_attention');
  saysRefundMayExist(again.state);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('429s alone (every send refused): nothing was refunded, and a retry is safe', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({
    kind: 'rate_limit',
    match: { idempotencyKey: createKey(order.id) },
    retryAfterSeconds: 0,
    count: 5,
  });
  const { status, state } = await start(order.id);

  expect(status).toBe('needs_attention');
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(0);
  expect(state.effect.status).toBe('none');
  expect(state.outcome?.reason).toMatch(/Nothing was refunded/);
  expect(state.parked).toMatchObject({ verdict: 'auto-retry is safe' });
});
