// The refund's send record moved to `sends` (migration 006), expand-then-contract: operations 1.0 recorded are
// backfilled and createRefund decides from them as 1.0 would have (replay, refuse, send); a send or proof a 1.0
// worker records after the migration, in the operation's row only, is read; and this build writes both records.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type Stripe from 'stripe';
import { createAttemptRunner } from '../../src/activities/attempt';
import { refundCreation, type CreateRefundInput } from '../../src/activities/create-refund';
import { createStripeClient, stripeIn } from '../../src/activities/stripe-client';
import type { ProviderWindows } from '../../src/contract';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { openStore, type OrderStore } from '../../src/store';
import { openPostgres, openSqlite, type Database } from '../../src/store/database';
import { migrate } from '../../src/store/migrations';
import { startStripeServer, type StripeServer } from '../../tools/src/servers/stripe-server';
import { activityEnv, detailsOf, failureOf } from '../helpers/activity-env';
import { DIALECTS, freshDatabase } from '../helpers/databases';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refund-sends-'));
const { run } = activityEnv();
const windows: ProviderWindows = { dedupeWindowMs: 24 * 3600_000, consistencyMs: 300, requestTimeoutMs: 1000 };
const DAY = 24 * 3600_000;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
let server: StripeServer;
let stripe: Stripe;

beforeAll(async () => {
  server = await startStripeServer({ port: 0, dbPath: path.join(dir, 'stripe.db'), faults: true });
  stripe = createStripeClient({ secretKey: 'sk_test_local', apiBase: server.url, requestTimeoutMs: 1000 });
});
afterAll(async () => {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const requestsWith = async (key: string) =>
  (
    (await (await fetch(`${server.url}/_requests?idempotency_key=${encodeURIComponent(key)}`)).json()) as {
      requests: [];
    }
  ).requests.length;

describe.each(DIALECTS)('on %s', (dialect) => {
  let url: string;
  let store: OrderStore;
  let raw: Database;
  const op = Object.fromEntries(['a', 'b', 'c', 'e'].map((o) => [o, `refund:test:o_${o}_${dialect}:v1`]));
  const createRefund = () =>
    refundCreation({
      stripe: (a) => stripeIn(stripe, a),
      log: store.operations,
      attempt: createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations }),
      windows,
    }).createRefund;

  /** An operation's row as 1.0 wrote it: its send counted in the row itself. */
  const written1_0 = (
    o: { id: string; order: string; scope?: string; status: string; sent: number } & Partial<{
      first: string;
      proven: number;
      refund: object;
    }>,
  ) =>
    sql`INSERT INTO operations (operation_id, order_id, operation_version, scope, request_hash, request_json, status, refund_json,
        first_sent_at, last_sent_at, requests_sent, off_the_wire_by, proven_absent_through, created_at, created_by, updated_at)
      VALUES (${o.id}, ${o.order}, 1, ${o.scope ?? 'test'}, 'h', ${JSON.stringify({ orderId: o.order, amount: 400, currency: 'usd', reason: 'requested_by_customer' })},
        ${o.status}, ${o.refund ? JSON.stringify(o.refund) : null}, ${o.sent ? (o.first ?? ago(60_000)) : null}, ${o.sent ? ago(60_000) : null},
        ${o.sent}, ${o.sent ? ago(58_000) : null}, ${o.proven ?? null}, ${ago(DAY)}, 'worker-1.0', ${ago(60_000)})`.execute(
      raw.kysely,
    );
  /** 1.0's markSent and its proof of absence, on the operation's row alone. */
  const sent1_0 = (id: string) =>
    sql`UPDATE operations SET first_sent_at = COALESCE(first_sent_at, ${ago(0)}), last_sent_at = ${ago(0)}, requests_sent = requests_sent + 1,
      off_the_wire_by = ${ago(-2000)} WHERE operation_id = ${id}`.execute(raw.kysely);
  const provenAbsent1_0 = (id: string) =>
    sql`UPDATE operations SET status = 'intent', absence_confirmed_at = ${ago(0)}, proven_absent_through = requests_sent
      WHERE operation_id = ${id}`.execute(raw.kysely);
  const columns = async (id: string) =>
    (
      await sql<{ requests_sent: number; proven_absent_through: number | null }>`
        SELECT requests_sent, proven_absent_through FROM operations WHERE operation_id = ${id}`.execute(raw.kysely)
    ).rows[0];

  const paidIntent = async () =>
    (
      await stripe.paymentIntents.create({
        amount: 1000,
        currency: 'usd',
        payment_method: 'pm_card_visa',
        confirm: true,
        automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
      })
    ).id;
  const input = async (operationId: string, orderId: string): Promise<CreateRefundInput> => ({
    orderId,
    operationId,
    paymentIntentId: await paidIntent(),
    amount: 400,
    currency: 'usd',
    reason: 'requested_by_customer',
    idempotencyKey: `${operationId}:create_refund`,
  });
  const receipt = {
    refundId: 're_1_0',
    paymentIntentId: 'pi_1_0',
    amount: 400,
    currency: 'usd',
    status: 'succeeded',
    operationId: op.a,
    replayed: false,
  };

  beforeAll(async () => {
    url = await freshDatabase(dialect, dir);
    raw = dialect === 'postgres' ? await openPostgres(url) : openSqlite(new URL(url).pathname);
    // The schema before 006, with what 1.0 recorded in it.
    await migrate(raw, '005_checkout');
    await written1_0({ id: op.a, order: `o_a_${dialect}`, status: 'refunded', sent: 1, refund: receipt });
    await written1_0({ id: op.b, order: `o_b_${dialect}`, status: 'unknown', sent: 2, first: ago(2 * DAY) });
    await written1_0({ id: op.c, order: `o_c_${dialect}`, status: 'intent', sent: 1, first: ago(2 * DAY), proven: 1 });
    await written1_0({
      id: 'refund:checkout:cart_d:v1',
      order: 'cart_d',
      scope: 'checkout',
      status: 'unknown',
      sent: 1,
    });
    await written1_0({ id: op.e, order: `o_e_${dialect}`, status: 'intent', sent: 0 });
    store = await openStore(url);
  });
  afterAll(async () => {
    await store?.close();
    await raw?.close();
  });

  it('backfills each sent refund under the key it went to Stripe with', async () => {
    await expect(store.sends.get(`${op.a}:create_refund`, 'x')).resolves.toMatchObject({
      operationId: op.a,
      requestsSent: 1,
      receipt,
    });
    await expect(store.sends.get(`${op.c}:create_refund`, 'x')).resolves.toMatchObject({
      requestsSent: 1,
      provenAbsentThrough: 1,
      receipt: null,
    });
    await expect(store.sends.get('checkout:cart_d:charge_card:compensate', 'x')).resolves.toMatchObject({
      operationId: 'refund:checkout:cart_d:v1',
      requestsSent: 1,
    });
    const rows = await sql<{ key: string }>`SELECT key FROM sends ORDER BY key`.execute(raw.kysely);
    // Never sent, no row: it reads as empty.
    expect(rows.rows.map((r) => r.key)).toEqual(
      ['a', 'b', 'c']
        .map((o) => `${op[o]}:create_refund`)
        .concat(['checkout:cart_d:charge_card:compensate'])
        .sort(),
    );
  });

  it("decides from 1.0's record: its receipt replayed, an open send outside the window refused, a proven absence sent", async () => {
    const a = await input(op.a, `o_a_${dialect}`);
    await expect(run(createRefund(), a)).resolves.toMatchObject({ refundId: 're_1_0', replayed: true });
    expect(await requestsWith(a.idempotencyKey)).toBe(0);

    const b = await input(op.b, `o_b_${dialect}`);
    const refused = await failureOf(run(createRefund(), b));
    expect(detailsOf(refused)).toMatchObject({ reason: 'outside_dedupe_window' });
    expect(await requestsWith(b.idempotencyKey)).toBe(0);

    const c = await input(op.c, `o_c_${dialect}`);
    await expect(run(createRefund(), c)).resolves.toMatchObject({ status: 'succeeded', replayed: false });
    expect(await requestsWith(c.idempotencyKey)).toBe(1);
    // Both records: the operation's row, which 1.0 workers still read, and the send's.
    await expect(columns(c.operationId)).resolves.toEqual({ requests_sent: 2, proven_absent_through: 1 });
    await expect(store.sends.get(`${op.c}:create_refund`, 'x')).resolves.toMatchObject({
      requestsSent: 2,
      provenAbsentThrough: 1,
      receipt: { operationId: c.operationId, status: 'succeeded' },
    });
  });

  it('reads what a 1.0 worker recorded after the migration, and counts on from it', async () => {
    // 1.0 proves b absent: the send's record still has it open, the read takes the later state, and b is sent.
    await provenAbsent1_0(op.b);
    await expect(store.operations.get(op.b)).resolves.toMatchObject({
      requestsSent: 2,
      provenAbsentThrough: 2,
    });
    const b = await input(op.b, `o_b_${dialect}`);
    await expect(run(createRefund(), b)).resolves.toMatchObject({ status: 'succeeded', replayed: false });
    await expect(store.sends.get(`${op.b}:create_refund`, 'x')).resolves.toMatchObject({
      requestsSent: 3,
      provenAbsentThrough: 2,
    });

    // 1.0 sends e, which had no send record: read as sent and open; this build's next send counts on from it.
    await sent1_0(op.e);
    await expect(store.operations.get(op.e)).resolves.toMatchObject({
      requestsSent: 1,
      provenAbsentThrough: null,
    });
    await store.operations.markSent(op.e, 'test', 1000);
    await expect(columns(op.e)).resolves.toEqual({ requests_sent: 2, proven_absent_through: null });
    await expect(store.sends.get(`${op.e}:create_refund`, 'x')).resolves.toMatchObject({ requestsSent: 2 });

    // A send's record ahead of the row, as the release that writes `sends` alone leaves it, is read too.
    await sql`UPDATE sends SET proven_absent_through = 2 WHERE key = ${`${op.e}:create_refund`}`.execute(raw.kysely);
    await expect(store.operations.get(op.e)).resolves.toMatchObject({ requestsSent: 2, provenAbsentThrough: 2 });
    await expect(columns(op.e)).resolves.toEqual({ requests_sent: 2, proven_absent_through: null });
  });
});
