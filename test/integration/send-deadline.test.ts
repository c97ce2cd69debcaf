// A send's deadline on the real stack (issue 23, item 1): no request of a send is on the wire after
// its stamp + STRIPE_TIMEOUT_MS, so a later version's proof that the earlier one never happened
// cannot be overtaken by the earlier one's request. PostgreSQL, so that the stamp can wait for a
// lock after its time was read, as a busy database makes it wait. And an email's (issue 34, item 2):
// its hand-over ends inside the attempt the run's pinned policy gives it, whatever the worker's own
// policy says, and the attempts after it judge it by the bound it recorded.
import { Context } from '@temporalio/activity';
import type { Transporter } from 'nodemailer';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createActivities } from '../../src/activities';
import { createMailTransport } from '../../src/activities/mail-transport';
import { requestHash } from '../../src/activities/operations';
import { outcomeOf } from '../../src/client/outcome';
import { messageIdForKey, stepsQuery, TASK_QUEUE } from '../../src/contract';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import type { StripeHook } from '../../tools/src/servers/stripe-server';
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

describe('an SMTP timeout raised and rolled out while a run is pinned to the old one', () => {
  /** How late the relay answers the notice's first hand-over: past the pinned 10 s attempt, inside the raised one. */
  const LATE_MS = 12_000;
  const raised = (p: RecoveryPolicy): RecoveryPolicy => ({
    ...p,
    timeouts: { ...p.timeouts, smtp: { startToCloseMs: 30_000, scheduleToCloseMs: 60_000 } },
  });
  /** The documented row that resends an email whose hand-over is unknown, with the same Message-ID. */
  const resending = (p: RecoveryPolicy): RecoveryPolicy => ({
    ...p,
    rules: [
      ...p.rules,
      {
        code: 'UNKNOWN_OUTCOME',
        certainty: '*',
        boundary: 'smtp',
        action: 'retry',
        owner: 'dependency_adapter',
        maxAttempts: 5,
        backoff: { initialMs: 100, coefficient: 2, maxMs: 1000 },
        jitter: 0,
      },
    ],
  });
  let mail: Transporter;
  beforeAll(() => {
    mail = createMailTransport(h.mail.smtpUrl);
  });
  afterAll(() => mail.close());
  const workerWith = (policy: RecoveryPolicy) =>
    createActivities({
      stripe: h.stripe,
      store: h.store,
      mail,
      mailFrom: 'refunds@test.local',
      settings: { ...h.settings, policy },
      temporal: h.env.client,
    });

  /**
   * A refund run pinned to `old` (10 s an SMTP attempt): the notice's first attempt runs on a worker
   * with the raised policy, the attempts after it on one with `old`, as a rollout leaves them. The
   * relay answers that first hand-over LATE_MS after its message. Returns once that answer is past.
   */
  async function rolledOut(old: RecoveryPolicy) {
    const before = workerWith(old);
    const after = workerWith(raised(old));
    const orderId = `ord_${Math.random().toString(36).slice(2, 10)}`;
    await h.seedOrder(orderId);
    const key = `${opId(orderId, 1)}:notify_customer`;
    const messageId = messageIdForKey(key);
    await h.mailFault({ kind: 'accept_late', stage: 'data', delayMs: LATE_MS, match: { messageId } });
    let firstAttemptAt = Infinity;
    const firstOnRaised = (input: Parameters<typeof before.sendRefundNotice>[0]) => {
      if (Context.current().info.attempt > 1) return before.sendRefundNotice(input);
      firstAttemptAt = Math.min(firstAttemptAt, Date.now());
      return after.sendRefundNotice(input);
    };
    return h.withWorker({ ...before, sendRefundNotice: firstOnRaised }, async (taskQueue) => {
      const handle = await h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${orderId}-v1`,
        args: [request(orderId, 1)],
      });
      const outcome = await outcomeOf(handle, 100);
      await new Promise((r) => setTimeout(r, Math.max(0, firstAttemptAt + LATE_MS + 2000 - Date.now())));
      const notice = (await handle.query(stepsQuery)).steps.find((s) => s.name === 'notify_customer');
      return {
        outcome,
        notice,
        entry: await h.store.getNotification(key),
        delivered: (await h.messages({ messageId })).length,
      };
    });
  }

  // Side by side: each case waits out the relay's late answer on an order and a Message-ID of its own.
  test.concurrent('with the row that resends an unknown email: one message, and the run completes', async () => {
    const { outcome, entry, delivered } = await rolledOut(resending(h.settings.policy));
    expect({ delivered, status: entry?.status }).toEqual({ delivered: 1, status: 'sent' });
    expect(outcome).toMatchObject({ kind: 'result', result: { status: 'completed' } });
  });

  test.concurrent(
    'with the shipped policy: a run that parks on an unknown hand-over has no message accepted after it',
    async () => {
      const { outcome, notice, entry, delivered } = await rolledOut(h.settings.policy);
      expect(outcome.kind).toBe('parked');
      expect(notice?.error).toMatchObject({ code: 'UNKNOWN_OUTCOME' });
      // The verdict stands: the hand-over it judged did not go on to be accepted behind it.
      expect({ delivered, status: entry?.status }).toEqual({ delivered: 0, status: 'sending' });
    },
  );
});
