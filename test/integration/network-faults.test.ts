// Network faults at each boundary, with Toxiproxy between the worker and Stripe, SMTP and the
// Temporal frontend. One row per fault: the hypothesis, the fault injected, the state the run must
// reach, the outcome it must never reach, and the evidence checked where the effects land (the
// Stripe server's ledger and request log, the mailbox, the store).
import { randomUUID } from 'node:crypto';
import { startRefund } from '../../src/client/refunds';
import type { Toxic } from '../../tools/src/chaos/toxiproxy';
import { refundWorkflowId, type RefundRunState } from '../../src/contract';
import { completed, startHarness, type Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ network: true });
});
afterAll(() => h?.close());
afterEach(() => h.toxiproxy!.reset());

const until = async (what: string, check: () => Promise<boolean>, ms = 20_000) => {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 25)))
    if (await check()) return;
  throw new Error(`timed out waiting for ${what}`);
};

interface Row {
  boundary: string;
  hypothesis: string;
  fault: string;
  /** Injects the fault for the run of `orderId`, and lifts it when the boundary has been crossed. */
  inject(ctx: { orderId: string; paymentIntentId: string; createKey: string }): Promise<() => Promise<void>>;
  expected: string;
  /** Checks the expected transition in the run's state: each attempt as outcome/requests sent. */
  transition(seen: { state: RefundRunState; create: string[]; notify: string[] }): void;
  forbidden: string;
}

const lostAnswer: Row['transition'] = ({ state, create }) => {
  expect(create).toEqual(['UNKNOWN_OUTCOME/1']);
  expect(state.reconciliation).toMatchObject({ lookups: 1, lastResult: 'completed' });
};

const toxic = (proxy: string, t: Toxic) => async () => {
  await h.toxiproxy!.addToxic(proxy, t);
  return () => h.toxiproxy!.removeToxic(proxy, t.name);
};
/**
 * Lifts the fault once the create's first attempt has ended under it (its row in the attempt ledger finished): the
 * request crossed the boundary and its answer was lost. Lifted as soon as the request reached the Stripe server, the
 * answer could still pass the proxy after the lift (seen once in CI).
 */
const untilAnswerLost = (proxy: string, t: Toxic) => async (ctx: { orderId: string; createKey: string }) => {
  await h.toxiproxy!.addToxic(proxy, t);
  return async () => {
    await until("the create's first attempt to end under the fault", async () => {
      const run = await h.env.client.workflow.getHandle(refundWorkflowId(ctx.orderId, 1)).describe();
      return (await h.store.operations.attempts(ctx.createKey, run.runId)).some((a) => a.finishedAt !== null);
    });
    expect(await h.requests({ idempotencyKey: ctx.createKey })).toHaveLength(1);
    await h.toxiproxy!.removeToxic(proxy, t.name);
  };
};
const downFor = (proxy: string, ms: number) => async () => {
  await h.toxiproxy!.setEnabled(proxy, false);
  return async () => {
    await new Promise((r) => setTimeout(r, ms));
    await h.toxiproxy!.setEnabled(proxy, true);
  };
};

const rows: Row[] = [
  {
    boundary: 'after the request is sent (Stripe)',
    hypothesis:
      'a refund whose answer is lost is made once: the run reconciles or resends the same key, never a second refund',
    fault:
      'reset_peer downstream on the Stripe proxy until the create has arrived (the request lands, the answer never does)',
    inject: untilAnswerLost('stripe', {
      name: 'lost-answer',
      type: 'reset_peer',
      stream: 'downstream',
      attributes: { timeout: 0 },
    }),
    expected: 'create_refund fails with an unknown outcome, then completes from the provider; the run completes',
    transition: lostAnswer,
    forbidden: 'two refunds, a second email, or a run that says "not refunded"',
  },
  {
    boundary: 'after the request is sent (Stripe)',
    hypothesis: 'an answer that stalls past the request timeout is an unknown outcome, settled with the provider',
    fault: 'timeout downstream on the Stripe proxy (answers held) until the create has arrived',
    inject: untilAnswerLost('stripe', {
      name: 'stalled-answer',
      type: 'timeout',
      stream: 'downstream',
      attributes: { timeout: 0 },
    }),
    expected: 'create_refund times out, the outcome is reconciled, the run completes',
    transition: lostAnswer,
    forbidden: 'two refunds or two emails',
  },
  {
    boundary: 'after the request is sent (Stripe)',
    hypothesis: 'an answer cut off part way is not trusted: the outcome is settled with the provider',
    fault: 'limit_data downstream (64 bytes) on the Stripe proxy until the create has arrived',
    inject: untilAnswerLost('stripe', {
      name: 'cut-answer',
      type: 'limit_data',
      stream: 'downstream',
      attributes: { bytes: 64 },
    }),
    expected: 'create_refund fails with an unknown outcome, then completes from the provider',
    transition: lostAnswer,
    forbidden: 'two refunds or two emails',
  },
  {
    boundary: 'before the request is sent (Stripe)',
    hypothesis: 'a provider that is down refuses the connection: nothing was sent, and a retry sends it once',
    fault: 'the Stripe proxy disabled for 1.5 s from the start',
    inject: downFor('stripe', 1500),
    expected: 'create_refund retries (not sent) and completes',
    transition: ({ state, create }) => {
      expect(create.at(-1)).toBe('ok/1');
      expect(create.slice(0, -1).length).toBeGreaterThanOrEqual(1);
      expect(create.slice(0, -1).every((a) => a === 'TRANSIENT_DEPENDENCY/0')).toBe(true);
      expect(state.reconciliation.lookups).toBe(0);
    },
    forbidden: 'two refunds, or a run parked as unknown for a request that never left',
  },
  {
    boundary: 'every Stripe call',
    hypothesis: 'slow answers within the timeouts change nothing',
    fault: 'latency 300 ms ± 200 ms downstream on the Stripe proxy',
    inject: toxic('stripe', {
      name: 'slow',
      type: 'latency',
      stream: 'downstream',
      attributes: { latency: 300, jitter: 200 },
    }),
    expected: 'the run completes',
    transition: ({ create }) => expect(create).toEqual(['ok/1']),
    forbidden: 'a retry storm (more than one create request) or a duplicate',
  },
  {
    boundary: 'before the outbox hand-over (SMTP)',
    hypothesis:
      'a mail server that is down refuses the connection before any session: the notice is sent once when it is back',
    fault: 'the SMTP proxy disabled for 1.5 s from the start',
    inject: downFor('smtp', 1500),
    expected: 'notify_customer retries and the notice is sent',
    transition: ({ notify }) => {
      expect(notify.length).toBeGreaterThanOrEqual(2);
      expect(notify.at(-1)).toMatch(/^ok\//);
    },
    forbidden: "two messages with the notice's Message-ID",
  },
  {
    boundary: 'the Temporal frontend',
    hypothesis: 'the frontend unreachable for a while loses nothing: the worker reconnects and the run carries on',
    fault: 'the Temporal proxy disabled for 4 s while the run is in flight',
    inject: downFor('temporal', 4000),
    expected: 'the run completes once the worker reconnects',
    transition: ({ state, create }) => {
      expect(state.status).toBe('completed');
      expect(create).toEqual(['ok/1']);
    },
    forbidden: 'a lost run, a duplicate refund or a duplicate email',
  },
];

test.each(rows.map((r) => [r.fault, r] as const))('%s', async (_fault, row) => {
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
  const operationId = `refund:test:${order.id}:v1`;
  const createKey = `${operationId}:create_refund`;
  const lift = await row.inject({ orderId: order.id, paymentIntentId: order.paymentIntentId, createKey });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  await lift();
  // Expected: the run completes, its receipts confirmed by the completion gate.
  const result = completed(await handle.result());
  // Forbidden: any effect twice. Counted where the effects land.
  const ledger = await h.ledger(order.paymentIntentId);
  expect(ledger).toHaveLength(1);
  expect(ledger[0]).toMatchObject({ idempotencyKey: createKey });
  const mail = await h.messages({ to: order.customerEmail });
  expect(mail).toHaveLength(1);
  expect(mail[0]!.messageId).toBe(result.notification.messageId);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250, status: 'partially_refunded' });
  expect(await h.store.operations.get(operationId)).toMatchObject({ status: 'completed' });
  // The fault bit where it was meant to: the run's own ledger shows the transition.
  const state = await h.state(handle.workflowId);
  const ledgerOf = (step: string) =>
    state.steps.find((x) => x.name === step)!.ledger.map((a) => `${a.outcome}/${a.transportRequests}`);
  row.transition({ state, create: ledgerOf('create_refund'), notify: ledgerOf('notify_customer') });
  if (row.fault.startsWith('latency')) expect(await h.requests({ idempotencyKey: createKey })).toHaveLength(1);
});
