// The Stripe transport's connections: a request that can make an effect has one of its own (no
// stale pooled socket can turn a request that never left into a lost answer), reads reuse one.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Attempt } from '../../src/activities/attempt';
import { createStripeClient, stripeIn } from '../../src/activities/stripe-client';

const refund = {
  id: 're_1',
  object: 'refund',
  amount: 100,
  currency: 'usd',
  status: 'succeeded',
  payment_intent: 'pi_1',
  metadata: {},
};

/** Listens on a loopback port: the base URL a Stripe client is given. */
async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

let server: http.Server;
let connections = 0;
let apiBase: string;
/** The idempotency keys of the requests the server received. */
const received: string[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    received.push(String(req.headers['idempotency-key']));
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('request-id', `req_${connections}`);
      res.end(
        JSON.stringify(
          req.url?.startsWith('/v1/refunds?')
            ? { object: 'list', data: [refund], has_more: false, url: '/v1/refunds' }
            : refund,
        ),
      );
    });
  });
  server.on('connection', () => connections++);
  apiBase = await listen(server);
});

afterAll(() => close(server));

test('each create opens a connection of its own; reads, from any client, reuse a kept-alive one', async () => {
  const stripe = createStripeClient({ secretKey: 'sk_test_1', apiBase });
  const before = connections;
  for (const key of ['k1', 'k2'])
    await stripe.refunds.create({ payment_intent: 'pi_1', amount: 100 }, { idempotencyKey: key });
  expect(connections - before).toBe(2);

  const reads = connections;
  await stripe.refunds.retrieve('re_1');
  await stripe.refunds.list({ payment_intent: 'pi_1' });
  await createStripeClient({ secretKey: 'sk_test_1', apiBase }).refunds.retrieve('re_1');
  expect(connections - reads).toBe(1);

  // A create after the reads still opens its own.
  await stripe.refunds.create({ payment_intent: 'pi_1', amount: 100 }, { idempotencyKey: 'k3' });
  expect(connections - reads).toBe(2);
});

/** An attempt as the runner makes one, with the list of what it gives back once its body has settled. */
const attempt = (): Attempt & { settled: (() => void)[] } => ({
  actor: 'test',
  startedAtMs: Date.now(),
  requests: 0,
  providerRequestId: null,
  settled: [],
});

test("attempts borrow the worker's clients in turn: concurrent ones hold different clients, each counting its own requests", async () => {
  const worker = createStripeClient({ secretKey: 'sk_test_1', apiBase });
  /** One attempt's body: `reads` retrieves, one at a time, on the client it borrowed; then its body settles. */
  const run = async (a: ReturnType<typeof attempt>, reads: number) => {
    const stripe = stripeIn(worker, a);
    for (let i = 0; i < reads; i++) await stripe.refunds.retrieve('re_1');
    a.settled.forEach((giveBack) => giveBack());
    return stripe;
  };
  const [a, b] = [attempt(), attempt()];
  const [first, second] = await Promise.all([run(a, 1), run(b, 3)]);
  expect(first).not.toBe(second);
  expect(first).not.toBe(worker);
  expect([a.requests, b.requests]).toEqual([1, 3]);

  // Given back (lent again from the next turn of the event loop), the same two clients serve the next two attempts:
  // none is built, and counts start from nothing.
  await new Promise((r) => setImmediate(r));
  const [c, d] = [attempt(), attempt()];
  const [third, fourth] = await Promise.all([run(c, 2), run(d, 1)]);
  expect(new Set([third, fourth])).toEqual(new Set([first, second]));
  expect([c.requests, d.requests, a.requests, b.requests]).toEqual([2, 1, 1, 3]);

  // A request on a client after its attempt gave it back (a body that leaked one) is not sent, nor counted.
  const err = await third.refunds.retrieve('re_1').catch((e: unknown) => e);
  expect(err).toMatchObject({ detail: { stage: 'not_sent', message: expect.stringMatching(/its attempt has ended/) } });
  expect([c.requests, d.requests]).toEqual([2, 1]);
});

test('a request its body never awaited is refused as its attempt ended, never counted under the next attempt', async () => {
  const worker = createStripeClient({ secretKey: 'sk_test_1', apiBase });
  const warm = attempt();
  await stripeIn(worker, warm).refunds.retrieve('re_1'); // the SDK's user agent is read once, on a first request
  warm.settled.forEach((giveBack) => giveBack());
  await new Promise((r) => setImmediate(r));

  const a = attempt();
  const lentToA = stripeIn(worker, a);
  const leaked = lentToA.refunds.retrieve('re_1').catch((e: unknown) => e);
  a.settled.forEach((giveBack) => giveBack());
  // Borrowed in the same turn, the client A gave back is not lent yet: B gets another.
  const b = attempt();
  const lentToB = stripeIn(worker, b);
  expect(lentToB).not.toBe(lentToA);
  expect(await leaked).toMatchObject({
    detail: { stage: 'not_sent', message: expect.stringMatching(/attempt has ended/) },
  });
  expect([a.requests, b.requests]).toEqual([0, 0]);
  b.settled.forEach((giveBack) => giveBack());
  await new Promise((r) => setImmediate(r));
  expect(new Set([stripeIn(worker, attempt()), stripeIn(worker, attempt())])).toEqual(new Set([lentToA, lentToB]));
});

describe("a send's deadline", () => {
  const T = 1000;
  let slow: http.Server;
  let slowBase: string;

  beforeAll(async () => {
    // Answers every request half a request timeout after it arrived.
    slow = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        setTimeout(() => {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(refund));
        }, T / 2);
      });
    });
    slowBase = await listen(slow);
  });

  afterAll(() => close(slow));

  test('a request begun just before the deadline is aborted at the deadline, not a full timeout later', async () => {
    const t0 = Date.now();
    const scope: Attempt = { actor: 'test', startedAtMs: t0, requests: 0, providerRequestId: null, sendBy: t0 + T };
    const stripe = createStripeClient({ secretKey: 'sk_test_1', apiBase: slowBase, requestTimeoutMs: T }, scope);
    await new Promise((r) => setTimeout(r, 0.9 * T));
    const outcome = await stripe.refunds
      .create({ payment_intent: 'pi_1', amount: 100 }, { idempotencyKey: 'k_deadline', timeout: T })
      .then(
        () => ({ answered: Date.now() - t0 }),
        (err: unknown) => ({ failed: Date.now() - t0, err }),
      );
    // The request was on the wire when the deadline passed: it is cut there, and may have reached the server.
    expect(outcome).toMatchObject({ failed: expect.any(Number) });
    const { failed, err } = outcome as { failed: number; err: Error & { detail?: unknown } };
    expect(failed).toBeLessThan(T + 100);
    expect(err.detail).toMatchObject({
      stage: 'sent',
      timedOut: true,
      message: expect.stringMatching(/no answer by its send's deadline \(\d+ ms\)/),
    });
    expect(scope.requests).toBe(1);
  });

  test("any request of an attempt, a read too, ends inside the attempt's start-to-close (less its margin)", async () => {
    // 1.2 s of a 2.5 s attempt gone: with the 1 s margin, 300 ms are left, less than the answer's T / 2.
    const attempt: Attempt = {
      actor: 'test',
      startedAtMs: Date.now() - 1200,
      startToCloseMs: 2500,
      requests: 0,
      providerRequestId: null,
    };
    const stripe = createStripeClient({ secretKey: 'sk_test_1', apiBase: slowBase, requestTimeoutMs: 10 * T }, attempt);
    const t0 = Date.now();
    const err = await stripe.refunds.retrieve('re_1').catch((e: unknown) => e as Error & { detail?: unknown });
    expect(Date.now() - t0).toBeLessThan(T / 2);
    expect(err).toMatchObject({
      detail: { stage: 'sent', timedOut: true, message: expect.stringMatching(/no answer within \d+ ms/) },
    });
    expect(attempt.requests).toBe(1);
  });

  test('a worker that stalls between connecting and writing sends nothing once the deadline has passed', async () => {
    const scope: Attempt = {
      actor: 'test',
      startedAtMs: Date.now(),
      requests: 0,
      providerRequestId: null,
      sendBy: Date.now() + T / 4,
    };
    const stripe = createStripeClient({ secretKey: 'sk_test_1', apiBase, requestTimeoutMs: T }, scope);
    // The stall: the event loop is blocked past the deadline the moment the connection is up, before anything else runs.
    const request = http.request;
    const spy = jest.spyOn(http, 'request').mockImplementation(((...args: Parameters<typeof http.request>) => {
      const req = request(...args);
      req.once('socket', (socket) =>
        socket.prependOnceListener('connect', () => {
          while (Date.now() < scope.sendBy! + 50);
        }),
      );
      return req;
    }) as typeof http.request);
    try {
      const err = await stripe.refunds
        .create({ payment_intent: 'pi_1', amount: 100 }, { idempotencyKey: 'k_stalled', timeout: T })
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ detail: { stage: 'not_sent' } });
    } finally {
      spy.mockRestore();
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(received).not.toContain('k_stalled');
    expect(scope.requests).toBe(0);
  });
});
