// A store whose clock is not the workflows' (issue 34, item 4): a PostgreSQL server an hour ahead.
// The outbox stamps hand-overs on the store's clock, a person's decision is dated on the workflow's;
// an approved resend names the hand-over it covers by its stamp, so the two clocks are never compared.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { startRefund } from '../../src/client/refunds';
import { decisionUpdate, messageIdForKey } from '../../src/contract';
import { freshDatabase } from '../helpers/databases';
import { startHarness, stopped, type Harness } from '../helpers/harness';

/** How far ahead the database server's clock runs: far past the time between a hand-over and a person's decision. */
const AHEAD_MS = 3600_000;

let h: Harness;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'store-clock-'));

/** A database whose server clock (clock_timestamp(), what the store reads) runs AHEAD_MS ahead of the hosts'. */
async function skewedDatabase(): Promise<string> {
  const url = await freshDatabase('postgres', dir);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Found before pg_catalog's on every connection's search path: the server's clock, as the store sees it.
    await client.query(
      `CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS $$ SELECT pg_catalog.clock_timestamp() + interval '${AHEAD_MS} milliseconds' $$`,
    );
    await client.query(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET search_path = public, pg_catalog`);
  } finally {
    await client.end();
  }
  return url;
}

beforeAll(async () => {
  h = await startHarness({ databaseUrl: await skewedDatabase() });
});
afterAll(async () => {
  await h?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test("the store's clock runs an hour ahead of the workers'", async () => {
  expect((await h.store.operations.clock()) - Date.now()).toBeGreaterThan(AHEAD_MS - 60_000);
});

test('an approved resend of a correction whose hand-over is unknown is sent, once, whatever the store clock says', async () => {
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`, { paymentMethod: 'pm_card_refundFail' });
  const operationId = `refund:test:${order.id}:v1`;
  const key = `${operationId}:notify_customer:compensate`;
  const correction = messageIdForKey(key);
  // The correction is stored and its 250 never sent: its hand-over is unknown, and the run parks for a person.
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: correction } });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  const parked = await stopped(handle);
  expect(parked.status).toBe('needs_attention');
  expect(parked.state.steps.find((s) => s.name === 'notify_customer')?.compensation).toMatchObject({
    status: 'unknown',
  });

  // A person looks once no attempt can still be handing it over (by the bound its hand-over recorded).
  for (let i = 0; i < 300; i++) {
    const until = (await h.store.getNotification(key))?.sendingUntil;
    if (until && Date.parse(until) < (await h.store.operations.clock())) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'compensate', by: 'ops', reason: 'not in the mailbox log' }],
  });
  await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'ok to resend' }] });
  const after = await stopped(handle);
  const resent = after.state.steps.find((s) => s.name === 'notify_customer')?.compensation;
  expect({ status: after.status, correction: resent?.status, why: resent?.error?.reason }).toEqual({
    status: 'compensated',
    correction: 'completed',
    why: undefined,
  });
  expect(await h.messages({ messageId: correction })).toHaveLength(2);
  await expect(h.store.getOrder(order.id)).resolves.toMatchObject({ refundedAmount: 0 });
});
