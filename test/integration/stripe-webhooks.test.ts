// Webhooks from the Stripe-compatible server, as Stripe sends them: endpoints made with the
// official SDK, events for refund changes (a pending refund settling, a succeeded one failing),
// signatures the SDK's own constructEvent accepts, retries until a 2xx, nothing lost while the
// receiver is down for a while, and a delivery that failed for good sent again on request.
import fs from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { createStripeClient } from '../../src/activities/stripe-client';
import { startStripeServer, type StripeServer } from '../../tools/src/servers/stripe-server';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stripe-webhooks-'));
let server: StripeServer;
let stripe: Stripe;

interface Received {
  event: Stripe.Event;
  id: string;
  header: string;
  body: string;
}

/** A receiver that records what it is sent and answers with `answer()` (a status code), on `port` (0: any free one). */
async function receiver(
  answer: (body: string) => number = () => 200,
  port = 0,
): Promise<{ url: string; got: Received[]; server: Server }> {
  const got: Received[] = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const status = answer(body);
      got.push({
        event: JSON.parse(body) as Stripe.Event,
        id: (JSON.parse(body) as { id: string }).id,
        header: String(req.headers['stripe-signature'] ?? ''),
        body,
      });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => srv.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/webhooks`, got, server: srv };
}

const until = async (ok: () => boolean, ms = 8000) => {
  for (const end = Date.now() + ms; !ok();) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
};

async function refundOn(paymentMethod: string, client = stripe): Promise<Stripe.Refund> {
  const pi = await client.paymentIntents.create({
    amount: 5000,
    currency: 'usd',
    payment_method: paymentMethod,
    confirm: true,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
  });
  return client.refunds.create({ payment_intent: pi.id, amount: 1250, metadata: { operation_id: `op-${pi.id}` } });
}

beforeAll(async () => {
  server = await startStripeServer({
    port: 0,
    dbPath: path.join(dir, 'stripe.db'),
    lifecycle: { settleDelayMs: 600, failDelayMs: 600 },
    webhookRetry: { initialMs: 200, maxMs: 400, maxAttempts: 20 },
  });
  stripe = createStripeClient({ secretKey: 'sk_test_local', apiBase: server.url, requestTimeoutMs: 5000 });
});
afterAll(() => server.close());

test('a pending refund settles after the delay: refund.created, then refund.updated, each signed so that constructEvent accepts it', async () => {
  const r = await receiver();
  try {
    const endpoint = await stripe.webhookEndpoints.create({
      url: r.url,
      enabled_events: ['refund.created', 'refund.updated'],
    });
    expect(endpoint.secret).toMatch(/^whsec_/);
    const refund = await refundOn('pm_card_refundPending');
    expect(refund.status).toBe('pending');
    await until(() =>
      r.got.some((g) => g.event.type === 'refund.updated' && (g.event.data.object as Stripe.Refund).id === refund.id),
    );
    const mine = r.got.filter((g) => (g.event.data.object as Stripe.Refund).id === refund.id);
    expect(mine.map((g) => [g.event.type, (g.event.data.object as Stripe.Refund).status])).toEqual([
      ['refund.created', 'pending'],
      ['refund.updated', 'succeeded'],
    ]);
    for (const g of mine) {
      const verified = stripe.webhooks.constructEvent(g.body, g.header, endpoint.secret!);
      expect(verified.id).toBe(g.id);
      expect(() => stripe.webhooks.constructEvent(g.body, g.header, 'whsec_wrong')).toThrow(/signature/i);
    }
    expect((await stripe.refunds.retrieve(refund.id)).status).toBe('succeeded');
    await stripe.webhookEndpoints.del(endpoint.id);
  } finally {
    r.server.close();
  }
});

test('a refund on pm_card_refundFail is created succeeded and later fails: refund.failed with the failure reason', async () => {
  const r = await receiver();
  try {
    const endpoint = await stripe.webhookEndpoints.create({ url: r.url, enabled_events: ['*'] });
    const refund = await refundOn('pm_card_refundFail');
    expect(refund.status).toBe('succeeded');
    await until(() => r.got.some((g) => g.event.type === 'refund.failed'));
    const failed = r.got.find((g) => g.event.type === 'refund.failed')!;
    expect(failed.event.data).toMatchObject({
      object: { id: refund.id, status: 'failed', failure_reason: 'expired_or_canceled_card' },
      previous_attributes: { status: 'succeeded' },
    });
    await until(() => r.got.filter((g) => (g.event.data.object as Stripe.Refund).id === refund.id).length >= 4);
    expect(new Set(r.got.map((g) => g.event.type))).toEqual(
      new Set(['refund.created', 'refund.failed', 'refund.updated', 'charge.refund.updated']),
    );
    await stripe.webhookEndpoints.del(endpoint.id);
  } finally {
    r.server.close();
  }
});

test("a refund's scheduled change can be made now (/_refunds/<id>/settle), once; a refund with none is named in a 404", async () => {
  // A server of its own whose refunds would wait an hour.
  const slow = await startStripeServer({
    port: 0,
    dbPath: path.join(dir, 'stripe-on-demand.db'),
    lifecycle: { settleDelayMs: 3_600_000, failDelayMs: 3_600_000 },
  });
  try {
    const client = createStripeClient({ secretKey: 'sk_test_local', apiBase: slow.url, requestTimeoutMs: 5000 });
    const refund = await refundOn('pm_card_refundFail', client);
    const settle = (id: string) => fetch(`${slow.url}/_refunds/${id}/settle`, { method: 'POST' });
    const now = await settle(refund.id);
    expect(now.status).toBe(200);
    expect(((await now.json()) as { refund: Stripe.Refund }).refund).toMatchObject({
      status: 'failed',
      failure_reason: 'expired_or_canceled_card',
    });
    expect((await client.refunds.retrieve(refund.id)).status).toBe('failed');
    const again = await settle(refund.id);
    expect(again.status).toBe(404);
    expect(await again.text()).toContain(`refund ${refund.id} has no scheduled change to settle`);
    expect((await settle('re_missing')).status).toBe(404);
  } finally {
    await slow.close();
  }
});

test('an endpoint that fails gets the same event again until it answers 2xx; one that is down gets it once it is back', async () => {
  let failures = 2;
  const r = await receiver(() => (failures-- > 0 ? 500 : 200));
  const endpoint = await stripe.webhookEndpoints.create({ url: r.url, enabled_events: ['refund.created'] });
  await refundOn('pm_card_visa');
  await until(() => r.got.length >= 3);
  expect(r.got.map((g) => g.id)).toEqual([r.got[0]!.id, r.got[0]!.id, r.got[0]!.id]);
  const deliveries = async () =>
    (
      (await (await fetch(`${server.url}/_webhooks?endpoint=${endpoint.id}`)).json()) as {
        deliveries: { eventId: string; status: string; attempts: number; lastStatus: number }[];
      }
    ).deliveries;
  await until(() => r.got.length >= 3);
  expect(await deliveries()).toEqual([
    expect.objectContaining({ eventId: r.got[0]!.id, status: 'delivered', attempts: 3, lastStatus: 200 }),
  ]);

  // The receiver goes away; a refund made meanwhile reaches it when it is back on the same port.
  const port = Number(new URL(r.url).port);
  await new Promise<void>((done) => r.server.close(() => done()));
  r.server.closeAllConnections();
  const later = await refundOn('pm_card_visa');
  await new Promise((w) => setTimeout(w, 700));
  expect((await deliveries()).find((d) => r.got.every((g) => g.id !== d.eventId))).toMatchObject({
    status: 'pending',
    lastStatus: null,
  });
  const { got: back, server: revived } = await receiver(() => 200, port);
  try {
    await until(() => back.some((g) => (g.event.data.object as Stripe.Refund).id === later.id));
    expect(stripe.webhooks.constructEvent(back[0]!.body, back[0]!.header, endpoint.secret!).type).toBe(
      'refund.created',
    );
  } finally {
    revived.close();
    await stripe.webhookEndpoints.del(endpoint.id);
  }
});

test('endpoints are refused for a bad URL or unknown events, and listed without their secrets', async () => {
  await expect(stripe.webhookEndpoints.create({ url: 'ftp://x', enabled_events: ['*'] })).rejects.toThrow(
    /must be http or https/,
  );
  await expect(
    stripe.webhookEndpoints.create({
      url: 'http://127.0.0.1:1/x',
      enabled_events: ['customer.created' as 'charge.refunded'],
    }),
  ).rejects.toThrow(/Invalid enabled_events: customer.created/);
  const made = await stripe.webhookEndpoints.create({ url: 'http://127.0.0.1:1/x', enabled_events: ['refund.failed'] });
  const listed = await stripe.webhookEndpoints.list();
  expect(listed.data.find((e) => e.id === made.id)).toMatchObject({
    url: 'http://127.0.0.1:1/x',
    enabled_events: ['refund.failed'],
  });
  expect(listed.data.every((e) => e.secret === undefined)).toBe(true);
  await stripe.webhookEndpoints.del(made.id);
});

test('a delivery that failed for good is sent again on request', async () => {
  const quick = await startStripeServer({
    port: 0,
    dbPath: path.join(dir, 'quick.db'),
    webhookRetry: { initialMs: 50, maxMs: 50, maxAttempts: 2 },
  });
  const client = createStripeClient({ secretKey: 'sk_test_local', apiBase: quick.url, requestTimeoutMs: 5000 });
  let up = false;
  const r = await receiver(() => (up ? 200 : 503));
  try {
    await client.webhookEndpoints.create({ url: r.url, enabled_events: ['refund.created'] });
    const pi = await client.paymentIntents.create({
      amount: 5000,
      currency: 'usd',
      payment_method: 'pm_card_visa',
      confirm: true,
      automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    });
    await client.refunds.create({ payment_intent: pi.id, amount: 100 });
    const deliveries = async () =>
      (
        (await (await fetch(`${quick.url}/_webhooks`)).json()) as {
          deliveries: { eventId: string; status: string; attempts: number }[];
        }
      ).deliveries;
    for (let i = 0; i < 100 && (await deliveries())[0]?.status !== 'failed'; i++)
      await new Promise((w) => setTimeout(w, 50));
    const [failed] = await deliveries();
    expect(failed).toMatchObject({ status: 'failed', attempts: 2 });
    up = true;
    expect(
      await (await fetch(`${quick.url}/_webhooks/resend?event=${failed!.eventId}`, { method: 'POST' })).json(),
    ).toEqual({ resent: 1 });
    for (let i = 0; i < 100 && (await deliveries())[0]?.status !== 'delivered'; i++)
      await new Promise((w) => setTimeout(w, 50));
    expect((await deliveries())[0]).toMatchObject({ status: 'delivered', attempts: 3 });
    expect(r.got.map((g) => g.id)).toEqual([failed!.eventId, failed!.eventId, failed!.eventId]);
  } finally {
    r.server.close();
    await quick.close();
  }
});
