// The webhook receiver on the real stack: the Stripe-compatible server signs and delivers refund
// events, the receiver checks them with the official SDK, records each once and hands it to the
// refund's run as a Signal; anything unsigned, badly signed, too old or malformed gets a 400 and
// changes nothing.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { startRefund } from '../../src/client/refunds';
import { inspectRun } from '../../src/inspect/inspection';
import { signatureHeader } from '../../tools/src/servers/stripe/events';
import { startWebhookReceiver } from '../../src/webhooks/receiver';
import type { followUpWorkflow } from '../../src/workflows';
import { followUpWorkflowId, stepsQuery } from '../../src/contract';
import { startHarness, stopped, type Harness } from '../helpers/harness';

let h: Harness;
let receiver: { url: string; close(): Promise<void> };
let secret: string;
beforeAll(async () => {
  h = await startHarness();
  // The secret is known only once the endpoint exists, and the endpoint needs the receiver's URL: start, register, then set it.
  const deps = { stripe: h.stripe, secret: 'whsec_pending', store: h.store, temporal: h.env.client };
  receiver = await startWebhookReceiver(deps, { port: 0 });
  const endpoint = await h.stripe.webhookEndpoints.create({ url: receiver.url, enabled_events: ['*'] });
  secret = endpoint.secret!;
  deps.secret = secret;
});
afterAll(async () => {
  await receiver?.close();
  await h?.close();
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const post = (body: string, signature?: string) =>
  fetch(receiver.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(signature && { 'stripe-signature': signature }) },
    body,
  }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as Record<string, unknown>,
  }));
const now = () => Math.floor(Date.now() / 1000);

test('a refund event reaches its run as a Signal, once, however often it is delivered; bad requests change nothing', async () => {
  const order = await h.seedOrder(newOrderId());
  // The gate cannot read the provider: the run parks after the refund, and waits there.
  await h.failProviderReads(order.paymentIntentId);
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  await stopped(handle);
  const operationId = `refund:test:${order.id}:v1`;
  let state = await handle.query(stepsQuery);
  for (let i = 0; i < 100 && state.providerEvents.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    state = await handle.query(stepsQuery);
  }
  const refundId = state.effect.refundId!;
  expect(state.providerEvents).toEqual([
    expect.objectContaining({ type: 'refund.created', refundId, refundStatus: 'succeeded' }),
  ]);
  const [recorded] = await h.store.providerEvents.forOperation(operationId);
  expect(recorded).toMatchObject({
    type: 'refund.created',
    handedTo: handle.workflowId,
    outcome: 'signalled',
    deliveries: 1,
  });

  // The same event twice more, freshly signed: recorded once, signalled once.
  const events = (await (await fetch(`${h.stripeUrl}/_events?object=${refundId}`)).json()) as {
    events: { id: string }[];
  };
  const body = JSON.stringify(events.events[0]);
  for (let i = 0; i < 2; i++)
    expect(await post(body, signatureHeader(body, secret, now()))).toMatchObject({
      status: 200,
      body: { duplicate: true },
    });
  expect((await h.store.providerEvents.forOperation(operationId))[0]).toMatchObject({ deliveries: 3 });
  expect((await handle.query(stepsQuery)).providerEvents).toHaveLength(1);

  // Unsigned, signed with another secret, signed too long ago, or not an event: 400, and nothing recorded.
  const forged = JSON.stringify({ ...events.events[0], id: 'evt_forged' });
  const refused = [
    await post(forged),
    await post(forged, signatureHeader(forged, 'whsec_other', now())),
    await post(forged, signatureHeader(forged, secret, now() - 3600)),
    await post('{not json', signatureHeader('{not json', secret, now())),
    await post('{"id":"evt_x"}', signatureHeader('{"id":"evt_x"}', secret, now())),
  ];
  expect(refused.map((r) => r.status)).toEqual([400, 400, 400, 400, 400]);
  expect(refused[0]!.body.error).toMatch(/unsigned/);
  expect(refused[1]!.body.error).toMatch(/No signatures found matching the expected signature/);
  expect(refused[2]!.body.error).toMatch(/Timestamp outside the tolerance zone/);
  expect(refused[4]!.body.error).toMatch(/malformed/);
  expect(await h.store.providerEvents.forOperation(operationId)).toHaveLength(1);
  expect((await handle.query(stepsQuery)).providerEvents).toHaveLength(1);

  // Operators see it in inspect, with its id, times and deliveries.
  const inspected = await inspectRun(h.env.client, h.sources, 'test', handle.workflowId);
  expect(inspected.facts).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        id: `event:${recorded!.eventId}`,
        says: expect.stringMatching(
          new RegExp(
            `^refund.created: refund ${refundId} succeeded, sent .*\\(3 deliveries\\); handed to ${handle.workflowId}`,
          ),
        ),
      }),
    ]),
  );
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
});

test('news of a finished run: a refund still standing is kept on the audit trail; a failure, even signed, is only a reason to ask the provider', async () => {
  const order = await h.seedOrder(newOrderId());
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
  const operationId = `refund:test:${order.id}:v1`;
  const refundId = (await handle.query(stepsQuery)).effect.refundId!;
  const event = (id: string, type: string, status: string) =>
    JSON.stringify({
      id,
      object: 'event',
      type,
      created: now(),
      data: {
        object: {
          id: refundId,
          object: 'refund',
          status,
          amount: 1250,
          currency: 'usd',
          metadata: { operation_id: operationId },
        },
      },
    });

  const standing = event(`evt_late_ok_${order.id}`, 'refund.updated', 'succeeded');
  expect(await post(standing, signatureHeader(standing, secret, now()))).toMatchObject({
    status: 200,
    body: { handedTo: null, why: expect.stringMatching(/has finished and the refund is succeeded; the event is kept/) },
  });
  expect((await h.store.operations.auditTrail(operationId)).at(-1)).toMatchObject({
    event: 'late_provider_event',
    detail: { type: 'refund.updated', refundStatus: 'succeeded', followUp: null },
  });

  // Correctly signed, but the provider says otherwise: the follow-up asks it, and undoes nothing.
  const late = event(`evt_late_${order.id}`, 'refund.failed', 'failed');
  expect(await post(late, signatureHeader(late, secret, now()))).toMatchObject({
    status: 200,
    body: { handedTo: followUpWorkflowId(operationId) },
  });
  expect(
    (await h.store.providerEvents.forOperation(operationId)).find((e) => e.eventId === `evt_late_${order.id}`),
  ).toMatchObject({ outcome: 'signalled follow-up' });
  const outcome = await h.env.client.workflow
    .getHandle<typeof followUpWorkflow>(followUpWorkflowId(operationId))
    .result();
  expect(outcome).toMatchObject({
    status: 'unchanged',
    reason: expect.stringMatching(/is succeeded at the provider: nothing to undo/),
    compensations: [],
  });
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250 });
  expect(await h.store.operations.get(operationId)).toMatchObject({ status: 'completed' });
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  const trail = await h.store.operations.auditTrail(operationId);
  expect(
    trail.find((a) => a.event === 'late_provider_event' && a.detail.eventId === `evt_late_${order.id}`),
  ).toMatchObject({ detail: { followUp: { workflowId: followUpWorkflowId(operationId) } } });
  expect(trail.at(-1)).toMatchObject({
    event: 'follow_up',
    detail: { status: 'unchanged', originalWorkflowId: handle.workflowId },
  });
  await h.recordHistory(followUpWorkflowId(operationId), 'follow-up-unchanged');
});

test('closing (a drain) takes no new request and waits for the one in flight to be answered', async () => {
  const own = await startWebhookReceiver(
    { stripe: h.stripe, secret, store: h.store, temporal: h.env.client },
    { port: 0 },
  );
  // A delivery whose body is still arriving when the close begins.
  const req = http.request(own.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': `t=${now()},v1=00` },
  });
  const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
  });
  req.write('{"id":');
  await new Promise((r) => setTimeout(r, 100));
  let closed = false;
  const closing = own.close().then(() => (closed = true));
  await new Promise((r) => setTimeout(r, 300));
  expect(closed).toBe(false);
  await expect(fetch(own.url, { method: 'POST', body: '{}' })).rejects.toThrow();
  req.end('"evt_1"}');
  // Answered (a signature that does not match is refused), not cut off; then the close completes.
  expect(await answered).toMatchObject({ status: 400, body: expect.stringMatching(/refused/) });
  await closing;
});
