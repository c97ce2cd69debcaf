import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type Stripe from 'stripe';
import { createStripeClient } from '../../src/activities/stripe-client';
import { startStripeServer, type StripeHook, type StripeServer } from '../../tools/src/servers/stripe-server';
import type { LedgerEffect } from '../../tools/src/servers/stripe/store';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stripe-server-'));
const KEY = 'sk_test_local';
let server: StripeServer;
let stripe: Stripe;

// Requests whose idempotency key is listed here wait in the beforeEffect seam until released,
// which holds them in flight deterministically.
const gates = new Map<string, { entered: () => void; released: Promise<void> }>();
const holdGate: StripeHook = async ({ idempotencyKey }) => {
  const gate = idempotencyKey === null ? undefined : gates.get(idempotencyKey);
  if (!gate) return;
  gate.entered();
  await gate.released;
};

function gate(key: string): { entered: Promise<void>; release: () => void } {
  let release!: () => void;
  let entered!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const enteredP = new Promise<void>((r) => (entered = r));
  gates.set(key, { entered, released });
  return { entered: enteredP, release };
}

interface RawResponse {
  status: number;
  headers: Headers;
  body: Record<string, unknown> & { error?: Record<string, unknown> };
}

async function raw(
  base: string,
  method: string,
  urlPath: string,
  form?: string,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const res = await fetch(`${base}${urlPath}`, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
    ...(form !== undefined && { body: form }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as RawResponse['body'] };
}

/** Writes bytes as they are, which fetch would not (it normalises the URL), and resolves with the whole reply. */
function rawHttp(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let reply = '';
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (reply += chunk));
    socket.on('close', () => resolve(reply));
    socket.on('error', reject);
  });
}

async function ledger(base: string, paymentIntentId: string): Promise<LedgerEffect[]> {
  const res = await fetch(`${base}/_ledger?payment_intent=${paymentIntentId}`);
  return ((await res.json()) as { effects: LedgerEffect[] }).effects;
}

async function refundEffects(base: string, paymentIntentId: string): Promise<LedgerEffect[]> {
  return (await ledger(base, paymentIntentId)).filter((e) => e.type === 'refund.created');
}

async function paidIntent(
  client: Stripe,
  amount = 1000,
  paymentMethod = 'pm_card_visa',
): Promise<Stripe.Response<Stripe.PaymentIntent>> {
  return client.paymentIntents.create({
    amount,
    currency: 'usd',
    payment_method: paymentMethod,
    confirm: true,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    metadata: { order_id: 'ord_1' },
    description: 'test order',
  });
}

beforeAll(async () => {
  server = await startStripeServer({ port: 0, dbPath: path.join(dir, 'stripe.db'), hooks: { beforeEffect: holdGate } });
  stripe = createStripeClient({ secretKey: KEY, apiBase: server.url });
});

afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('payment intents', () => {
  it('creates a succeeded intent with confirm=true and retrieves it', async () => {
    const pi = await paidIntent(stripe, 1500);
    expect(pi).toMatchObject({
      object: 'payment_intent',
      amount: 1500,
      amount_received: 1500,
      currency: 'usd',
      status: 'succeeded',
      livemode: false,
      payment_method: 'pm_card_visa',
      metadata: { order_id: 'ord_1' },
      description: 'test order',
      automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    });
    expect(pi.id).toMatch(/^pi_\w+$/);
    expect(pi.latest_charge).toMatch(/^ch_/);
    expect(Number.isInteger(pi.created)).toBe(true);
    expect(pi.lastResponse.requestId).toMatch(/^req_/);

    const again = await stripe.paymentIntents.retrieve(pi.id);
    expect(again).toEqual(pi);
    // stripe-node keys every POST itself (stripe-node-retry-<uuid>) even with retries off.
    expect(await ledger(server.url, pi.id)).toEqual([
      expect.objectContaining({
        type: 'payment_intent.created',
        objectId: pi.id,
        amount: 1500,
        idempotencyKey: expect.stringMatching(/^stripe-node-retry-/),
      }),
      // Confirmed: the customer was charged, once.
      expect.objectContaining({ type: 'charge.succeeded', objectId: pi.latest_charge, amount: 1500 }),
    ]);
  });

  it('refuses to confirm without a way to avoid redirects, as Stripe does', async () => {
    const res = await raw(
      server.url,
      'POST',
      '/v1/payment_intents',
      'amount=100&currency=usd&payment_method=pm_card_visa&confirm=true',
    );
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param: 'return_url' });
  });

  it('answers 404 resource_missing for an unknown intent', async () => {
    await expect(stripe.paymentIntents.retrieve('pi_missing')).rejects.toMatchObject({
      type: 'StripeInvalidRequestError',
      statusCode: 404,
      code: 'resource_missing',
    });
  });
});

describe('refunds', () => {
  it('creates, retrieves and lists refunds by payment intent, newest first', async () => {
    const pi = await paidIntent(stripe, 1000);
    const first = await stripe.refunds.create({
      payment_intent: pi.id,
      amount: 300,
      reason: 'requested_by_customer',
      metadata: { order_id: 'ord_1', operation_id: 'op_1' },
    });
    expect(first).toMatchObject({
      object: 'refund',
      amount: 300,
      currency: 'usd',
      status: 'succeeded',
      payment_intent: pi.id,
      charge: pi.latest_charge,
      reason: 'requested_by_customer',
      metadata: { order_id: 'ord_1', operation_id: 'op_1' },
    });
    expect(first.id).toMatch(/^re_/);
    // Without an amount Stripe refunds whatever is left.
    const rest = await stripe.refunds.create({ payment_intent: pi.id });
    expect(rest.amount).toBe(700);

    expect(await stripe.refunds.retrieve(first.id)).toEqual(first);
    const list = await stripe.refunds.list({ payment_intent: pi.id });
    expect(list).toMatchObject({ object: 'list', has_more: false, url: '/v1/refunds' });
    expect(list.data.map((r) => r.id)).toEqual([rest.id, first.id]);
    const page = await stripe.refunds.list({ payment_intent: pi.id, limit: 1 });
    expect(page.data.map((r) => r.id)).toEqual([rest.id]);
    expect(page.has_more).toBe(true);
    const next = await stripe.refunds.list({ payment_intent: pi.id, limit: 1, starting_after: rest.id });
    expect(next.data.map((r) => r.id)).toEqual([first.id]);
    expect(next.has_more).toBe(false);
  });

  it('rejects an over-refund as amount_too_large and a refund of nothing left as charge_already_refunded', async () => {
    const pi = await paidIntent(stripe, 500);
    await expect(stripe.refunds.create({ payment_intent: pi.id, amount: 501 })).rejects.toMatchObject({
      type: 'StripeInvalidRequestError',
      statusCode: 400,
      code: 'amount_too_large',
      param: 'amount',
    });
    await stripe.refunds.create({ payment_intent: pi.id });
    await expect(stripe.refunds.create({ payment_intent: pi.id, amount: 1 })).rejects.toMatchObject({
      statusCode: 400,
      code: 'charge_already_refunded',
    });
    expect(await refundEffects(server.url, pi.id)).toHaveLength(1);
  });

  it('answers 404 for an unknown payment intent and names the field of a bad parameter', async () => {
    await expect(stripe.refunds.create({ payment_intent: 'pi_nope' })).rejects.toMatchObject({
      statusCode: 404,
      code: 'resource_missing',
      param: 'payment_intent',
    });
    const missing = await raw(server.url, 'POST', '/v1/refunds', 'amount=100');
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'parameter_missing',
      param: 'payment_intent',
    });
    const notInt = await raw(server.url, 'POST', '/v1/refunds', 'payment_intent=pi_x&amount=12.5');
    expect(notInt.body.error).toMatchObject({ code: 'parameter_invalid_integer', param: 'amount' });
    const badReason = await raw(server.url, 'POST', '/v1/refunds', 'payment_intent=pi_x&reason=because');
    expect(badReason.body.error).toMatchObject({ type: 'invalid_request_error', param: 'reason' });
    const unknown = await raw(server.url, 'POST', '/v1/refunds', 'payment_intent=pi_x&refund_everything=true');
    expect(unknown.body.error).toMatchObject({ code: 'parameter_unknown', param: 'refund_everything' });
  });

  it('reads a refund on the refundFail test card back as failed after creating it succeeded', async () => {
    const pi = await paidIntent(stripe, 800, 'pm_card_refundFail');
    const refund = await stripe.refunds.create({ payment_intent: pi.id, amount: 800 });
    expect(refund.status).toBe('succeeded');
    const later = await stripe.refunds.retrieve(refund.id);
    expect(later).toMatchObject({ status: 'failed', failure_reason: 'expired_or_canceled_card' });
    const list = await stripe.refunds.list({ payment_intent: pi.id });
    expect(list.data[0]).toMatchObject({ id: refund.id, status: 'failed' });
  });
});

describe('idempotency', () => {
  it('replays the stored response for the same key and parameters without a second effect', async () => {
    const pi = await paidIntent(stripe);
    const params = { payment_intent: pi.id, amount: 250, metadata: { order_id: 'ord_1' } };
    const first = await stripe.refunds.create(params, { idempotencyKey: 'replay-1' });
    const second = await stripe.refunds.create(params, { idempotencyKey: 'replay-1' });
    expect(first.lastResponse.headers['idempotent-replayed']).toBeUndefined();
    expect(second.lastResponse.headers['idempotent-replayed']).toBe('true');
    expect(second.lastResponse.headers['original-request']).toBe(first.lastResponse.requestId);
    expect(second.lastResponse.requestId).not.toBe(first.lastResponse.requestId);
    expect(second).toEqual(first);
    expect(await refundEffects(server.url, pi.id)).toEqual([
      expect.objectContaining({ objectId: first.id, amount: 250, idempotencyKey: 'replay-1', requestsWithKey: 2 }),
    ]);
  });

  it('matches parameters regardless of their order', async () => {
    const pi = await paidIntent(stripe);
    const a = await raw(
      server.url,
      'POST',
      '/v1/refunds',
      `payment_intent=${pi.id}&amount=10&metadata[b]=2&metadata[a]=1`,
      { 'Idempotency-Key': 'order-1' },
    );
    const b = await raw(
      server.url,
      'POST',
      '/v1/refunds',
      `metadata[a]=1&amount=10&metadata[b]=2&payment_intent=${pi.id}`,
      { 'Idempotency-Key': 'order-1' },
    );
    expect(a.status).toBe(200);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.body.id).toBe(a.body.id);
  });

  it('refuses the same key with different parameters as an idempotency_error', async () => {
    const pi = await paidIntent(stripe);
    await stripe.refunds.create({ payment_intent: pi.id, amount: 100 }, { idempotencyKey: 'changed-1' });
    const err = await stripe.refunds
      .create({ payment_intent: pi.id, amount: 200 }, { idempotencyKey: 'changed-1' })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ type: 'StripeIdempotencyError', rawType: 'idempotency_error', statusCode: 400 });
    expect((err as Error).message).toMatch(/same parameters/);
    const otherEndpoint = await raw(server.url, 'POST', '/v1/payment_intents', 'amount=100&currency=usd', {
      'Idempotency-Key': 'changed-1',
    });
    expect(otherEndpoint.status).toBe(400);
    expect(otherEndpoint.body.error).toMatchObject({ type: 'idempotency_error' });
    expect(await refundEffects(server.url, pi.id)).toHaveLength(1);
  });

  it('answers 409 to a request racing one with the same key that is still in flight', async () => {
    const pi = await paidIntent(stripe);
    const form = `payment_intent=${pi.id}&amount=100`;
    const held = gate('race-1');
    const first = raw(server.url, 'POST', '/v1/refunds', form, { 'Idempotency-Key': 'race-1' });
    await held.entered;
    const racing = await raw(server.url, 'POST', '/v1/refunds', form, { 'Idempotency-Key': 'race-1' });
    expect(racing.status).toBe(409);
    expect(racing.body.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_in_use' });
    gates.delete('race-1');
    held.release();
    const done = await first;
    expect(done.status).toBe(200);
    const retry = await raw(server.url, 'POST', '/v1/refunds', form, { 'Idempotency-Key': 'race-1' });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body.id).toBe(done.body.id);
    expect(await refundEffects(server.url, pi.id)).toEqual([
      expect.objectContaining({ objectId: done.body.id, requestsWithKey: 3 }),
    ]);
  });

  it('does not store a validation failure, so a corrected request may reuse the key', async () => {
    const pi = await paidIntent(stripe);
    const bad = await raw(server.url, 'POST', '/v1/refunds', `payment_intent=${pi.id}&amount=ten`, {
      'Idempotency-Key': 'fix-1',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'parameter_invalid_integer', param: 'amount' });
    const fixed = await raw(server.url, 'POST', '/v1/refunds', `payment_intent=${pi.id}&amount=10`, {
      'Idempotency-Key': 'fix-1',
    });
    expect(fixed.status).toBe(200);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
    expect(await refundEffects(server.url, pi.id)).toEqual([
      expect.objectContaining({ idempotencyKey: 'fix-1', requestsWithKey: 1 }),
    ]);
  });

  it('stores and replays a business error such as amount_too_large', async () => {
    const pi = await paidIntent(stripe, 100);
    const form = `payment_intent=${pi.id}&amount=101`;
    const first = await raw(server.url, 'POST', '/v1/refunds', form, { 'Idempotency-Key': 'too-much-1' });
    expect(first.status).toBe(400);
    expect(first.body.error).toMatchObject({ type: 'invalid_request_error', code: 'amount_too_large' });
    const second = await raw(server.url, 'POST', '/v1/refunds', form, { 'Idempotency-Key': 'too-much-1' });
    expect(second.status).toBe(400);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(await refundEffects(server.url, pi.id)).toEqual([]);
  });

  it('echoes the key and gives every response a Request-Id', async () => {
    const res = await raw(server.url, 'POST', '/v1/refunds', 'payment_intent=pi_nope', { 'Idempotency-Key': 'echo-1' });
    expect(res.headers.get('idempotency-key')).toBe('echo-1');
    expect(res.headers.get('request-id')).toMatch(/^req_/);
  });

  it('forgets a key once its time to live has passed', async () => {
    const ttlServer = await startStripeServer({ port: 0, dbPath: ':memory:', idempotencyTtlMs: 50 });
    try {
      const client = createStripeClient({ secretKey: KEY, apiBase: ttlServer.url });
      const pi = await paidIntent(client);
      const first = await client.refunds.create({ payment_intent: pi.id, amount: 10 }, { idempotencyKey: 'ttl-1' });
      await new Promise((r) => setTimeout(r, 100));
      const second = await client.refunds.create({ payment_intent: pi.id, amount: 10 }, { idempotencyKey: 'ttl-1' });
      expect(second.lastResponse.headers['idempotent-replayed']).toBeUndefined();
      expect(second.id).not.toBe(first.id);
      expect(await refundEffects(ttlServer.url, pi.id)).toHaveLength(2);
    } finally {
      await ttlServer.close();
    }
  });
});

describe('the server', () => {
  it('keeps its state across a restart on the same database file', async () => {
    const dbPath = path.join(dir, 'restart.db');
    const before = await startStripeServer({ port: 0, dbPath });
    const client = createStripeClient({ secretKey: KEY, apiBase: before.url });
    const pi = await paidIntent(client);
    const refund = await client.refunds.create({ payment_intent: pi.id, amount: 100 }, { idempotencyKey: 'restart-1' });
    await before.close();

    const after = await startStripeServer({ port: 0, dbPath });
    try {
      const again = createStripeClient({ secretKey: KEY, apiBase: after.url });
      expect(await again.paymentIntents.retrieve(pi.id)).toEqual(pi);
      expect(await again.refunds.retrieve(refund.id)).toEqual(refund);
      const replay = await again.refunds.create(
        { payment_intent: pi.id, amount: 100 },
        { idempotencyKey: 'restart-1' },
      );
      expect(replay.lastResponse.headers['idempotent-replayed']).toBe('true');
      expect(replay.id).toBe(refund.id);
      expect(await refundEffects(after.url, pi.id)).toEqual([expect.objectContaining({ requestsWithKey: 2 })]);
    } finally {
      await after.close();
    }
  });

  it('does not leave a key locked by a request cut off by a shutdown', async () => {
    const dbPath = path.join(dir, 'cut-off.db');
    const before = await startStripeServer({ port: 0, dbPath, hooks: { beforeEffect: holdGate } });
    const pi = await paidIntent(createStripeClient({ secretKey: KEY, apiBase: before.url }));
    const form = `payment_intent=${pi.id}&amount=100`;
    const held = gate('cut-1');
    const cutOff = raw(before.url, 'POST', '/v1/refunds', form, { 'Idempotency-Key': 'cut-1' }).catch(
      (e: unknown) => e,
    );
    await held.entered;
    await before.close();
    // fetch's TypeError comes from Node's realm, not jest's, so match on the text.
    expect(String(await cutOff)).toMatch(/fetch failed/);
    gates.delete('cut-1');
    held.release();

    const after = await startStripeServer({ port: 0, dbPath });
    try {
      const retry = await raw(after.url, 'POST', '/v1/refunds', form, { 'Idempotency-Key': 'cut-1' });
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
      expect(await refundEffects(after.url, pi.id)).toHaveLength(1);
    } finally {
      await after.close();
    }
  });

  it('answers 401 without a test-mode secret key', async () => {
    const none = await fetch(`${server.url}/v1/refunds/re_x`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as RawResponse['body']).error).toMatchObject({ type: 'authentication_error' });
    expect(none.headers.get('request-id')).toMatch(/^req_/);
    const live = await raw(server.url, 'GET', '/v1/refunds/re_x', undefined, {
      Authorization: 'Bearer sk_live_abcdefghijkl',
    });
    expect(live.status).toBe(401);
    const publishable = await raw(server.url, 'GET', '/v1/refunds/re_x', undefined, {
      Authorization: 'Bearer pk_test_abc',
    });
    expect(publishable.status).toBe(401);
    const basic = await raw(server.url, 'GET', '/v1/refunds/re_x', undefined, {
      Authorization: `Basic ${Buffer.from(`${KEY}:`).toString('base64')}`,
    });
    expect(basic.status).toBe(404);
  });

  it('answers 404 for unknown routes', async () => {
    const res = await raw(server.url, 'GET', '/v1/charges');
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error' });
    expect(String(res.body.error?.message)).toMatch(/Unrecognized request URL/);
  });

  it('parses nested and list parameters the way Stripe encodes them', async () => {
    const res = await raw(
      server.url,
      'POST',
      '/v1/payment_intents',
      'amount=100&currency=USD&payment_method_types[]=card&expand[0]=latest_charge&metadata[order_id]=o%5B1%5D&metadata[note]=a%26b',
    );
    expect(res.status).toBe(200);
    expect(await ledger(server.url, String(res.body.id))).toEqual([
      expect.objectContaining({ idempotencyKey: null, requestsWithKey: 0 }),
    ]);
    expect(res.body).toMatchObject({
      currency: 'usd',
      status: 'requires_payment_method',
      payment_method_types: ['card'],
      automatic_payment_methods: null,
      metadata: { order_id: 'o[1]', note: 'a&b' },
    });
    const dup = await raw(server.url, 'POST', '/v1/payment_intents', 'amount=1&amount=2&currency=usd');
    expect(dup.status).toBe(400);
  });

  it('answers 400 to an unparseable request URL and keeps serving', async () => {
    const reply = await rawHttp(server.port, 'GET //a:b HTTP/1.0\r\nHost: localhost\r\n\r\n');
    expect(reply).toMatch(/^HTTP\/1\.[01] 400 /);
    expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { type: 'invalid_request_error', message: 'Invalid request URL: //a:b' },
    });
    await expect(raw(server.url, 'GET', '/v1/charges')).resolves.toMatchObject({ status: 404 });
  });

  it('survives a client that hangs up in the middle of a request body', async () => {
    const socket = net.connect(server.port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /v1/payment_intents HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${KEY}\r\n` +
        'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\namount=1',
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(raw(server.url, 'GET', '/v1/charges')).resolves.toMatchObject({ status: 404 });
  });
});

describe('the fault API and the request log', () => {
  let faulty: StripeServer;
  let client: Stripe;
  const arm = (body: unknown) => fetch(`${faulty.url}/_faults`, { method: 'POST', body: JSON.stringify(body) });
  const requests = async (key: string) =>
    (
      (await (await fetch(`${faulty.url}/_requests?idempotency_key=${key}`)).json()) as {
        requests: { status: number | null; fault: string | null; replayed: boolean }[];
      }
    ).requests;
  const create = (pi: string, key: string, amount = 100) =>
    client.refunds.create({ payment_intent: pi, amount }, { idempotencyKey: key });

  beforeAll(async () => {
    faulty = await startStripeServer({ port: 0, dbPath: path.join(dir, 'faulty.db'), faults: true });
    client = createStripeClient({ secretKey: KEY, apiBase: faulty.url, requestTimeoutMs: 500 });
  });
  afterAll(async () => {
    await faulty.close();
  });

  it('is off unless the server was started with it', async () => {
    const res = await fetch(`${server.url}/_faults`, { method: 'POST', body: '{"kind":"server_error"}' });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { message: expect.stringMatching(/fault injection is off/) } });
  });

  it('refuses a malformed fault naming the field, and lists and clears what is armed', async () => {
    const bad = await arm({ kind: 'server_error', status: 200 });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { message: expect.stringMatching(/invalid fault: status/) } });
    expect((await arm('not json' as unknown as object)).status).toBe(400);
    const armed = (await (
      await arm({ kind: 'slow', delayMs: 1, match: { idempotencyKey: 'nobody' }, count: 3 })
    ).json()) as { fault: { id: string } };
    const listed = (await (await fetch(`${faulty.url}/_faults`)).json()) as {
      faults: { id: string; remaining: number }[];
    };
    expect(listed.faults).toEqual([expect.objectContaining({ id: armed.fault.id, remaining: 3 })]);
    expect(await (await fetch(`${faulty.url}/_faults/${armed.fault.id}`, { method: 'DELETE' })).json()).toEqual({
      cleared: 1,
    });
  });

  it('fails before commit: the connection is cut and nothing is stored against the key', async () => {
    const pi = await paidIntent(client, 1000);
    await arm({ kind: 'fail_before_commit', match: { idempotencyKey: 'fbc-1' } });
    await expect(create(pi.id, 'fbc-1')).rejects.toMatchObject({ type: 'StripeConnectionError' });
    expect(await refundEffects(faulty.url, pi.id)).toHaveLength(0);
    await expect(create(pi.id, 'fbc-1')).resolves.toMatchObject({ amount: 100 });
    expect((await requests('fbc-1')).map((r) => [r.status, r.fault])).toEqual([
      [null, 'fail_before_commit'],
      [200, null],
    ]);
  });

  it('commits, then drops the answer: a resend with the key replays the refund that was made', async () => {
    const pi = await paidIntent(client, 1000);
    await arm({ kind: 'drop_after_commit', match: { idempotencyKey: 'dac-1' } });
    await expect(create(pi.id, 'dac-1')).rejects.toMatchObject({ type: 'StripeConnectionError' });
    const replay = await create(pi.id, 'dac-1');
    expect(replay.lastResponse.headers['idempotent-replayed']).toBe('true');
    expect(await refundEffects(faulty.url, pi.id)).toEqual([expect.objectContaining({ objectId: replay.id })]);
  });

  it('stalls a committed answer past the client timeout', async () => {
    const pi = await paidIntent(client, 1000);
    await arm({ kind: 'stall', match: { idempotencyKey: 'stall-1' }, delayMs: 1500 });
    await expect(create(pi.id, 'stall-1')).rejects.toMatchObject({ message: expect.stringMatching(/timeout/) });
    expect(await refundEffects(faulty.url, pi.id)).toHaveLength(1);
  });

  it('answers 429 with Retry-After, and 5xx, without doing or storing anything', async () => {
    const pi = await paidIntent(client, 1000);
    await arm({ kind: 'rate_limit', match: { paymentIntent: pi.id }, retryAfterSeconds: 7 });
    await arm({ kind: 'server_error', status: 503, match: { paymentIntent: pi.id } });
    const limited = await raw(faulty.url, 'POST', '/v1/refunds', `payment_intent=${pi.id}&amount=100`, {
      'Idempotency-Key': 'rl-1',
    });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    const unavailable = await raw(faulty.url, 'POST', '/v1/refunds', `payment_intent=${pi.id}&amount=100`, {
      'Idempotency-Key': 'rl-1',
    });
    expect(unavailable.status).toBe(503);
    expect(await refundEffects(faulty.url, pi.id)).toHaveLength(0);
    const ok = await raw(faulty.url, 'POST', '/v1/refunds', `payment_intent=${pi.id}&amount=100`, {
      'Idempotency-Key': 'rl-1',
    });
    expect(ok.status).toBe(200);
    expect((await requests('rl-1')).map((r) => [r.status, r.fault])).toEqual([
      [429, 'rate_limit'],
      [503, 'server_error'],
      [200, null],
    ]);
  });

  it('spreads a fault through traffic with every: it fires on each every-th request it matches, and one due with another waits a request', async () => {
    const pi = await paidIntent(client, 5000);
    await arm({ kind: 'rate_limit', match: { paymentIntent: pi.id }, every: 3, count: 2 });
    await arm({ kind: 'server_error', status: 503, match: { paymentIntent: pi.id }, every: 3, count: 1 });
    const statuses: number[] = [];
    for (let i = 1; i <= 8; i++)
      statuses.push(
        (
          await raw(faulty.url, 'POST', '/v1/refunds', `payment_intent=${pi.id}&amount=100`, {
            'Idempotency-Key': `every-${i}`,
          })
        ).status,
      );
    expect(statuses).toEqual([200, 200, 429, 503, 200, 429, 200, 200]);
    expect(await refundEffects(faulty.url, pi.id)).toHaveLength(5);
    expect((await arm({ kind: 'rate_limit', every: 0 })).status).toBe(400);
  });

  it('slows a request and still answers it', async () => {
    const pi = await paidIntent(client, 1000);
    await arm({ kind: 'slow', match: { idempotencyKey: 'slow-1' }, delayMs: 300 });
    const started = Date.now();
    await expect(create(pi.id, 'slow-1')).resolves.toMatchObject({ status: 'succeeded' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('refunds less than asked and cuts the answer: the stored answer for the key is the partial refund', async () => {
    const pi = await paidIntent(client, 1000);
    await arm({ kind: 'partial', match: { idempotencyKey: 'part-1' }, amount: 40 });
    await expect(create(pi.id, 'part-1')).rejects.toMatchObject({ type: 'StripeConnectionError' });
    await expect(create(pi.id, 'part-1')).resolves.toMatchObject({ amount: 40 });
  });

  it('keeps a new refund out of list results for a while, but not out of retrieve', async () => {
    const pi = await paidIntent(client, 1000);
    await arm({ kind: 'lagging_list', match: { idempotencyKey: 'lag-1' }, lagMs: 400 });
    const made = await create(pi.id, 'lag-1');
    expect((await client.refunds.list({ payment_intent: pi.id })).data).toHaveLength(0);
    await expect(client.refunds.retrieve(made.id)).resolves.toMatchObject({ id: made.id });
    await new Promise((r) => setTimeout(r, 450));
    expect((await client.refunds.list({ payment_intent: pi.id })).data.map((r) => r.id)).toEqual([made.id]);
    // The charge itself knows: what is left to refund counts the hidden refund too.
    await expect(create(pi.id, 'lag-2', 950)).rejects.toMatchObject({ code: 'amount_too_large' });
  });
});

describe('checkout charges', () => {
  const charge = (paymentMethod: string, operationId: string, key: string) =>
    stripe.paymentIntents.create(
      {
        amount: 4200,
        currency: 'usd',
        payment_method: paymentMethod,
        confirm: true,
        automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
        metadata: { operation_id: operationId },
      },
      { idempotencyKey: key },
    );

  it('charges once under a key: a resend with it replays the first answer, and the ledger holds one charge', async () => {
    const first = await charge('pm_card_visa', 'checkout:op-1', 'checkout:op-1:charge_card');
    const again = await charge('pm_card_visa', 'checkout:op-1', 'checkout:op-1:charge_card');
    expect(first.status).toBe('succeeded');
    expect(again.id).toBe(first.id);
    expect(again.lastResponse.headers['idempotent-replayed']).toBe('true');
    const charges = (await ledger(server.url, first.id)).filter((e) => e.type === 'charge.succeeded');
    expect(charges).toHaveLength(1);
  });

  it('declines as Stripe does: a 402 card_error naming the PaymentIntent, which exists and charged nothing; the key replays the decline', async () => {
    const declined = await charge('pm_card_chargeDeclined', 'checkout:op-2', 'checkout:op-2:charge_card').catch(
      (e: unknown) => e as Stripe.errors.StripeCardError,
    );
    expect(declined).toMatchObject({ type: 'StripeCardError', code: 'card_declined', decline_code: 'generic_decline' });
    const pi = (declined as Stripe.errors.StripeCardError).payment_intent!;
    expect(pi).toMatchObject({ status: 'requires_payment_method', last_payment_error: { code: 'card_declined' } });
    expect((await ledger(server.url, pi.id)).filter((e) => e.type === 'charge.succeeded')).toHaveLength(0);
    await expect(charge('pm_card_chargeDeclined', 'checkout:op-2', 'checkout:op-2:charge_card')).rejects.toMatchObject({
      statusCode: 402,
      decline_code: 'generic_decline',
    });
  });

  it('finds a charge by its operation id with the Search API, newest first; another query form is refused', async () => {
    const made = await charge('pm_card_visa', 'checkout:op-3', 'checkout:op-3:charge_card');
    await charge('pm_card_visa', 'checkout:op-4', 'checkout:op-4:charge_card');
    const found = await stripe.paymentIntents.search({ query: "metadata['operation_id']:'checkout:op-3'" });
    expect(found.data.map((p) => p.id)).toEqual([made.id]);
    await expect(
      stripe.paymentIntents.search({ query: "metadata['operation_id']:'checkout:none'" }),
    ).resolves.toMatchObject({ data: [] });
    await expect(stripe.paymentIntents.search({ query: 'amount>100' })).rejects.toMatchObject({ statusCode: 400 });
  });
});
