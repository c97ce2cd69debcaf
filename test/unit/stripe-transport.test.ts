// The Stripe transport's connections: a request that can make an effect has one of its own (no
// stale pooled socket can turn a request that never left into a lost answer), reads reuse one.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createStripeClient } from '../../src/activities/payments';

const refund = { id: 're_1', object: 'refund', amount: 100, currency: 'usd', status: 'succeeded', payment_intent: 'pi_1', metadata: {} };

let server: http.Server;
let connections = 0;
let apiBase: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('request-id', `req_${connections}`);
      res.end(JSON.stringify(req.url?.startsWith('/v1/refunds?') ? { object: 'list', data: [refund], has_more: false, url: '/v1/refunds' } : refund));
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  apiBase = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

test('each create opens a connection of its own; reads, from any client, reuse a kept-alive one', async () => {
  const stripe = createStripeClient({ secretKey: 'sk_test_1', apiBase });
  const before = connections;
  for (const key of ['k1', 'k2']) await stripe.refunds.create({ payment_intent: 'pi_1', amount: 100 }, { idempotencyKey: key });
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
