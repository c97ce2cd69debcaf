// A send's deadline on the real stack (issue 23, item 1): no request of a send is on the wire after
// its stamp + STRIPE_TIMEOUT_MS, so a later version's proof that the earlier one never happened
// cannot be overtaken by the earlier one's request. PostgreSQL, so that the stamp can wait for a
// lock after its time was read, as a busy database makes it wait.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { requestHash } from '../../src/activities/operations';
import { outcomeOf } from '../../src/client/outcome';
import type { StripeHook } from '../../tools/src/servers/stripe-server';
import { TASK_QUEUE } from '../../src/contract';
import { refundWorkflow } from '../../src/workflows';
import { freshDatabase } from '../helpers/databases';
import { startHarness, TEST_POLICY, type Harness } from '../helpers/harness';

/** STRIPE_TIMEOUT_MS and STRIPE_LIST_CONSISTENCY_MS as the workers assume them. */
const T = 4000;
const C = 300;
/** How long the stamp's transaction waits for the row lock after it read the time: half a request timeout. */
const STAMP_WAIT_MS = T / 2;

let h: Harness;
let databaseUrl: string;
let beforeEffect: StripeHook | undefined;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'send-deadline-'));

beforeAll(async () => {
  databaseUrl = await freshDatabase('postgres', dir);
  const policy = {
    ...TEST_POLICY,
    timeouts: { ...TEST_POLICY.timeouts, stripe: { startToCloseMs: 10_000, scheduleToCloseMs: 60_000 } },
  };
  // The stamp may wait for a lock longer than the harness's usual 200 ms.
  h = await startHarness({
    databaseUrl,
    busyTimeoutMs: 5000,
    requestTimeoutMs: T,
    consistencyMs: C,
    policy,
    stripeHooks: { beforeEffect: (ctx) => beforeEffect?.(ctx) },
  });
});
afterAll(async () => {
  await h?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const request = (orderId: string, operationVersion: number) => ({
  orderId,
  amount: 1000,
  currency: 'usd',
  requestedBy: 'test',
  operationVersion,
});
const opId = (orderId: string, version: number) => `refund:test:${orderId}:v${version}`;
const createKey = (orderId: string, version: number) => `${opId(orderId, version)}:create_refund`;

/** Another connection holding the operation's row lock: the stamp's UPDATE waits for it after its time was read. */
async function lockRow(operationId: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => undefined); // the server going away at teardown is not this test's failure
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT 1 FROM operations WHERE operation_id = $1 FOR UPDATE', [operationId]);
  return {
    /** Resolves once a write (the stamp's UPDATE) waits for the lock. */
    async waiter(): Promise<void> {
      for (let i = 0; i < 600; i++) {
        const { rows } = await client.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        if (Number(rows[0]!.n) > 0) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      const { rows } = await client.query(
        `SELECT state, wait_event_type, wait_event, left(query, 120) AS q FROM pg_stat_activity WHERE datname = current_database()`,
      );
      throw new Error(`no stamp of ${operationId} waited for the lock: ${JSON.stringify(rows)}`);
    },
    async release(): Promise<void> {
      await client.query('ROLLBACK');
      await client.end();
    },
  };
}

test("v1's request held by the provider past the list window, v2 fenced behind it: one refund", async () => {
  const orderId = `ord_${Math.random().toString(36).slice(2, 10)}`;
  const order = await h.seedOrder(orderId);
  // v1's intent as its run records it, so that its row can be locked before the run stamps its send.
  const v1 = request(orderId, 1);
  await h.store.operations.commitIntent({
    operationId: opId(orderId, 1),
    orderId,
    operationVersion: 1,
    scope: 'test',
    requestHash: requestHash({ ...v1, reason: 'requested_by_customer' }),
    request: { orderId, amount: v1.amount, currency: v1.currency, reason: 'requested_by_customer' },
    actor: 'test',
  });
  const lock = await lockRow(opId(orderId, 1));

  // The provider holds v1's create for as long as the client waits, and commits it at the last moment it still does.
  let arrived!: () => void;
  const v1Arrived = new Promise<void>((resolve) => (arrived = resolve));
  let committed!: () => void;
  const v1Committed = new Promise<void>((resolve) => (committed = resolve));
  beforeEffect = async (ctx) => {
    if (ctx.idempotencyKey !== createKey(orderId, 1)) return;
    arrived();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([ctx.clientGone, new Promise((r) => (timer = setTimeout(r, 30_000)))]);
    clearTimeout(timer);
    setImmediate(committed);
  };

  await h.env.client.workflow.start(refundWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: `refund-${orderId}-v1`,
    args: [v1],
  });
  try {
    await lock.waiter();
    await new Promise((r) => setTimeout(r, STAMP_WAIT_MS));
  } finally {
    await lock.release();
  }
  await v1Arrived;

  // v2 comes in while v1's request is out: its fence reconciles v1 and, proven absent, sends.
  const v2 = await h.env.client.workflow.start(refundWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: `refund-${orderId}-v2`,
    args: [request(orderId, 2)],
  });
  const v2Outcome = await outcomeOf(v2, 100);
  await v1Committed;
  beforeEffect = undefined;

  const refunds = await h.ledger(order.paymentIntentId);
  expect(refunds.map((e) => e.idempotencyKey)).toEqual([createKey(orderId, 1)]);
  // v2 found v1's refund instead of a proof of its absence, and sent nothing.
  const v2State = v2Outcome.kind === 'parked' ? v2Outcome.state : undefined;
  expect(v2State?.outcome?.reason).toMatch(
    new RegExp(`earlier operation ${opId(orderId, 1)} turned out to have refunded 1000 usd`),
  );
  expect((await h.requests({ idempotencyKey: createKey(orderId, 2) })).filter((r) => r.method === 'POST')).toHaveLength(
    0,
  );
});
