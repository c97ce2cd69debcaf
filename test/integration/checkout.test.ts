// The checkout saga on the real stack (Temporal dev server, the Stripe-compatible and SMTP servers,
// a SQLite store), on the same harness as the refund: each effect counted where it lands (the Stripe
// server's ledger, the mailbox, the stock), once, whatever was lost on the way.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  checkoutStateQuery,
  checkoutWorkflowId,
  decisionUpdate,
  messageIdForKey,
  TASK_QUEUE,
  type CheckoutResult,
  type CheckoutRunState,
} from '../../src/contract';
import { checkoutWorkflow, sweepWorkflow } from '../../src/workflows';
import { findTool } from '../../tools/src/stack/tools';
import { seedCart, setStock, stockLeft } from '../../tools/src/shop/carts';
import { startHarness, TEST_POLICY, type Harness } from '../helpers/harness';
import { nodeArgs } from '../helpers/compiled';

const run = promisify(execFile);
const CART_CLI = path.join(__dirname, '..', '..', 'tools', 'src', 'cli', 'cart.ts');

let h: Harness;
// Pending refunds settle when a test says so; a refund's compensation asks how one stands every second.
const POLICY = {
  ...TEST_POLICY,
  awaitProvider: { deadlineMs: 60_000, poll: { initialMs: 1000, coefficient: 1, maxMs: 1000 }, jitter: 0 },
};
beforeAll(async () => {
  h = await startHarness({ policy: POLICY, lifecycle: { settleDelayMs: 3_600_000 } });
});
afterAll(async () => {
  await h?.close();
});

/** A cart of two items (2 × A, 1 × B) of 4200 usd, with `left` of each in stock; its customer's address is its own. */
async function cart(left = 5) {
  const id = `cart_${randomUUID().slice(0, 8)}`;
  const items = [
    { sku: `${id}-a`, quantity: 2 },
    { sku: `${id}-b`, quantity: 1 },
  ];
  for (const { sku } of items) await setStock(h.store, sku, left);
  const email = `${id}@example.com`;
  await seedCart(h.store, { id, customerEmail: email, currency: 'usd', amount: 4200, items });
  const stock = async () => Promise.all(items.map((i) => stockLeft(h.store, i.sku)));
  return { id, email, stock };
}

const start = (cartId: string, paymentMethod = 'pm_card_visa') =>
  h.env.client.workflow.start(checkoutWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: checkoutWorkflowId(cartId),
    args: [{ cartId, paymentMethod, requestedBy: 'test' }],
  });

/** Charges the Stripe server made for the cart: over every PaymentIntent its key's metadata names. */
async function charges(cartId: string) {
  const found = await h.stripe.paymentIntents.search({ query: `metadata['key']:'checkout:${cartId}:charge_card'` });
  const effects = (await Promise.all(found.data.map((pi) => h.effects(pi.id)))).flat();
  return effects.filter((e) => e.type === 'charge.succeeded');
}

/** The mail server refuses the cart's customer for good: the receipt is never sent. */
const refuseReceipt = (to: string) =>
  h.mailFault({ kind: 'reply', stage: 'rcpt', code: 550, message: '5.1.1 no such user', match: { recipient: to } });

/** Waits for the run to park for a person. */
async function parked(handle: { query: (q: typeof checkoutStateQuery) => Promise<CheckoutRunState> }) {
  let state = await handle.query(checkoutStateQuery);
  for (let i = 0; i < 100 && state.status !== 'needs_attention'; i++) {
    await new Promise((r) => setTimeout(r, 200));
    state = await handle.query(checkoutStateQuery);
  }
  return state;
}

/** A checkout paid with `paymentMethod` whose receipt may have reached the customer (its answer lost): parked, quarantined. */
async function parkedAtLostReceipt(paymentMethod: string) {
  const c = await cart();
  const receipt = messageIdForKey(`checkout:${c.id}:send_receipt`);
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: receipt }, count: 20 });
  const handle = await start(c.id, paymentMethod);
  await parked(handle);
  return { c, handle };
}

const completed = (r: CheckoutResult) => {
  if (r.status !== 'completed') throw new Error(`expected completed, got ${r.status}: ${r.reason}`);
  return r;
};

test('a checkout reserves the stock, charges the card once and emails one receipt', async () => {
  const c = await cart();
  const handle = await start(c.id);
  const result = completed(await handle.result());
  expect(result.charge).toMatchObject({ status: 'succeeded', amount: 4200, currency: 'usd' });
  expect(await charges(c.id)).toEqual([
    expect.objectContaining({ paymentIntentId: result.charge.paymentIntentId, amount: 4200 }),
  ]);
  expect(await h.messages({ to: c.email })).toEqual([
    expect.objectContaining({ subject: expect.stringContaining('Your receipt') }),
  ]);
  expect(await c.stock()).toEqual([3, 4]);
  const state = await handle.query(checkoutStateQuery);
  expect(state.steps.map((s) => [s.name, s.status, s.idempotencyKey])).toEqual([
    ['reserve_stock', 'completed', `checkout:${c.id}:reserve_stock`],
    ['charge_card', 'completed', `checkout:${c.id}:charge_card`],
    ['send_receipt', 'completed', `checkout:${c.id}:send_receipt`],
  ]);
  expect(state).toMatchObject({ saga: 'checkout', status: 'completed', effect: { status: 'charged' } });
  // The worker's policy governs the run from its reservation on: the charge gets its 5 s, not the shipped 15 s.
  const { events } = await handle.fetchHistory();
  const charge = events!.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'chargeCard');
  expect(Number(charge!.activityTaskScheduledEventAttributes!.startToCloseTimeout!.seconds)).toBeLessThanOrEqual(5);
  await h.recordHistory(handle.workflowId, 'checkout-completed');
});

test('a declined card charges nothing, puts the stock back and ends compensated, with no email', async () => {
  const c = await cart();
  const result = await (await start(c.id, 'pm_card_chargeDeclined')).result();
  expect(result).toMatchObject({ status: 'compensated', failedStep: 'charge_card' });
  expect((result as { reason: string }).reason).toMatch(
    /^the card was declined \(generic_decline\)\. Undone: reserve_stock/,
  );
  expect(await c.stock()).toEqual([5, 5]);
  expect(await h.messages({ to: c.email })).toEqual([]);
  expect(await charges(c.id)).toEqual([]);
  const state = await h.env.client.workflow.getHandle(checkoutWorkflowId(c.id)).query(checkoutStateQuery);
  expect(state.effect.status).toBe('declined');
  await h.recordHistory(checkoutWorkflowId(c.id), 'checkout-declined');
  expect(state.steps[0]!.compensation).toMatchObject({
    status: 'completed',
    key: `checkout:${c.id}:reserve_stock:compensate`,
  });
});

test('a cart short of stock is rejected before anything is charged', async () => {
  const c = await cart(1);
  const result = await (await start(c.id)).result();
  expect(result).toMatchObject({ status: 'rejected', failedStep: 'reserve_stock' });
  expect((result as { reason: string }).reason).toContain(`not enough ${c.id}-a left for 2`);
  expect(await h.requests({ idempotencyKey: `checkout:${c.id}:charge_card` })).toEqual([]);
  expect(await c.stock()).toEqual([1, 1]);
  await h.recordHistory(checkoutWorkflowId(c.id), 'checkout-rejected');
});

test('a charge whose answer was lost is looked up at the provider and found, never sent again', async () => {
  const c = await cart();
  const key = `checkout:${c.id}:charge_card`;
  await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: key } });
  const handle = await start(c.id);
  const result = completed(await handle.result());
  expect(await charges(c.id)).toEqual([expect.objectContaining({ paymentIntentId: result.charge.paymentIntentId })]);
  expect((await h.requests({ idempotencyKey: key })).map((r) => r.status)).toEqual([null]);
  const state = await handle.query(checkoutStateQuery);
  expect(state.steps[1]).toMatchObject({
    status: 'completed',
    note: expect.stringMatching(/^receipt from reconciliation: found pi_\w+: succeeded$/),
  });
  await h.recordHistory(handle.workflowId, 'checkout-reconciled');
  expect(await h.messages({ to: c.email })).toHaveLength(1);
});

test('compensate after the charge refunds it under its own key, puts the stock back and ends compensated', async () => {
  const c = await cart();
  await refuseReceipt(c.email);
  const handle = await start(c.id);
  const state = await parked(handle);
  expect(state.outcome).toMatchObject({ status: 'needs_attention', failedStep: 'send_receipt' });
  await expect(
    handle.executeUpdate(decisionUpdate, { args: [{ decision: 'confirm-delivered', by: 'ops', reason: 'x' }] }),
  ).rejects.toMatchObject({ cause: { message: expect.stringContaining('it takes no confirm-delivered') } });
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'compensate', by: 'ops', reason: 'customer gave up' }],
  });
  // The shipped policy asks a second person to approve a compensation.
  await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'checked' }] });
  const result = await handle.result();
  expect(result).toMatchObject({ status: 'compensated' });
  const { paymentIntentId } = state.steps[1]!.output as { paymentIntentId: string };
  expect(await charges(c.id)).toHaveLength(1);
  expect(await h.ledger(paymentIntentId)).toEqual([
    expect.objectContaining({ amount: 4200, idempotencyKey: `checkout:${c.id}:charge_card:compensate` }),
  ]);
  expect(await c.stock()).toEqual([5, 5]);
  // The receipt was refused for good: it never reached the customer, so no correction either.
  expect(await h.messages({ to: c.email })).toEqual([]);
  await h.recordHistory(handle.workflowId, 'checkout-parked-then-compensated');
});

test('cancelled while a receipt that may have gone out is parked: refunded, stock back, a correction sent', async () => {
  const c = await cart();
  const receipt = messageIdForKey(`checkout:${c.id}:send_receipt`);
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: receipt }, count: 20 });
  const handle = await start(c.id);
  const state = await parked(handle);
  expect(state.outcome).toMatchObject({ failedStep: 'send_receipt', quarantined: true });
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow();
  const after = await handle.query(checkoutStateQuery);
  expect(after).toMatchObject({ status: 'compensated', effect: { status: 'refunded' } });
  expect(after.steps.map((s) => s.compensation?.status)).toEqual(['completed', 'completed', 'completed']);
  const { paymentIntentId } = after.steps[1]!.output as { paymentIntentId: string };
  const [refund] = await h.ledger(paymentIntentId);
  expect(refund).toBeDefined();
  expect(await c.stock()).toEqual([5, 5]);
  const mails = await h.messages({ to: c.email });
  // The correction tells the customer their money is back: it goes out after the refund, never before.
  expect(Date.parse(mails.at(-1)!.receivedAt)).toBeGreaterThanOrEqual(Date.parse(refund!.createdAt));
  expect(mails.map((m) => m.subject)).toEqual([
    expect.stringContaining('Your receipt'),
    expect.stringContaining('Correction: your order'),
  ]);
  await h.recordHistory(handle.workflowId, 'checkout-cancelled-compensated');
});

test('started from the temporal CLI, and from npm run checkout (of a cart npm run cart put in the store), it completes', async () => {
  const c = await cart();
  const workflowId = checkoutWorkflowId(c.id);
  const request = JSON.stringify({ cartId: c.id, paymentMethod: 'pm_card_visa', requestedBy: 'ops' });
  const temporal = ['--address', h.env.address, '--namespace', h.namespace, '--codec-endpoint', h.codecUrl];
  await run(findTool('temporal'), [
    'workflow',
    'start',
    '--type',
    'checkoutWorkflow',
    '--task-queue',
    TASK_QUEUE,
    '--workflow-id',
    workflowId,
    '--input',
    request,
    ...temporal,
  ]);
  expect(await h.env.client.workflow.getHandle(workflowId).result()).toMatchObject({ status: 'completed' });

  const id = `cart_${randomUUID().slice(0, 8)}`;
  // The cart put in the store as `npm run cart` does on a local stack (tools/, run from its source).
  const cartArgs = ['--id', id, '--items', `${id}-mug:2`, '--amount', '1800', '--email', `${id}@example.com`];
  await run(process.execPath, ['--import', 'tsx', CART_CLI, ...cartArgs, '--stock', '3'], { env: h.cliEnv() });
  const args = ['--cart', id, '--requested-by', 'ops'];
  const { stdout } = await run(process.execPath, nodeArgs('cli/checkout.ts', ...args), { env: h.cliEnv() });
  expect(stdout).toContain(`workflow checkout-${id}`);
  expect(JSON.parse(stdout.slice(stdout.indexOf('{')))).toMatchObject({
    status: 'completed',
    charge: { amount: 1800 },
  });
  expect(await stockLeft(h.store, `${id}-mug`)).toBe(1);
  const refused = await run(process.execPath, nodeArgs('cli/checkout.ts', '--cart', 'c 1', '--requested-by', 'ops'), {
    env: h.cliEnv(),
  }).catch((e: { code: number; stderr: string }) => e);
  expect(refused).toMatchObject({ code: 2, stderr: expect.stringContaining('cartId: must be 1-64 letters') });
});

test('inspect shows a parked checkout and its evidence; decide answers it', async () => {
  const c = await cart();
  await refuseReceipt(c.email);
  const handle = await start(c.id);
  await parked(handle);
  await h.recordHistory(handle.workflowId, 'checkout-parked');
  const env = { ...h.cliEnv(), DECIDER_KEY_FILE: '' };
  const { stdout } = await run(process.execPath, nodeArgs('cli/inspect.ts', handle.workflowId, '--json'), { env });
  const inspected = JSON.parse(stdout) as { verdict: string; address: string; facts: { id: string; says: string }[] };
  expect(inspected).toMatchObject({
    execution: 'RUNNING',
    refundStatus: 'needs_attention',
    orderId: c.id,
    operationId: `checkout:${c.id}`,
  });
  const text = await run(process.execPath, nodeArgs('cli/inspect.ts', handle.workflowId), {
    env,
  });
  expect(text.stdout).toContain(inspected.verdict);
  expect(text.stdout).toContain(`--answers ${inspected.address}`);
  const says = Object.fromEntries(inspected.facts.map((f) => [f.id.split(':').slice(0, 2).join(':'), f.says]));
  expect(says['store:cart']).toContain(`stock reserved by checkout:${c.id}:reserve_stock`);
  expect(says['store:send']).toMatch(/^1 charge request\(s\) sent; .*"status":"succeeded"/);
  expect(Object.keys(says)).toContain(
    `stripe:${((await handle.query(checkoutStateQuery)).steps[1]!.output as { paymentIntentId: string }).paymentIntentId}`,
  );
  const decided = await run(
    process.execPath,
    nodeArgs(
      'cli/decide.ts',
      ...[handle.workflowId, 'abandon', '--answers', inspected.address],
      ...['--by', 'ops', '--reason', 'support takes it'],
    ),
    { env },
  );
  expect(decided.stdout).toMatch(/decision #1 abandon by ops/);
  await expect(handle.result()).resolves.toMatchObject({ status: 'abandoned', failedStep: 'send_receipt' });
  await h.recordHistory(handle.workflowId, 'checkout-abandoned');
});

test("a refund of the charge still pending when the wait's deadline passes is left open for a person: no correction goes out", async () => {
  const c = await cart();
  const receipt = messageIdForKey(`checkout:${c.id}:send_receipt`);
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: receipt }, count: 20 });
  const poll = { initialMs: 1000, coefficient: 1, maxMs: 1000 };
  const policy = { ...POLICY, awaitProvider: { deadlineMs: 3000, poll, jitter: 0 } };
  const state = await h.withWorker(
    {},
    async (taskQueue) => {
      const handle = await h.env.client.workflow.start(checkoutWorkflow, {
        taskQueue,
        workflowId: checkoutWorkflowId(c.id),
        args: [{ cartId: c.id, paymentMethod: 'pm_card_refundPending', requestedBy: 'test' }],
      });
      await parked(handle);
      await handle.cancel();
      await expect(handle.result()).rejects.toThrow();
      return handle.query(checkoutStateQuery);
    },
    { policy },
  );
  // The money is not back: the charge stands, its refund's receipt pending, for a person; no correction says otherwise.
  expect(state).toMatchObject({
    status: 'needs_attention',
    effect: { status: 'charged' },
    outcome: { failedStep: 'charge_card', reason: expect.stringContaining('Not undone: charge_card, send_receipt') },
  });
  expect(state.steps[1]!.compensation).toMatchObject({ status: 'completed', output: { status: 'pending' } });
  expect(state.steps[2]!.compensation).toBeUndefined();
  const paymentIntentId = (state.steps[1]!.output as { paymentIntentId: string }).paymentIntentId;
  expect(await h.ledger(paymentIntentId)).toHaveLength(1);
  expect((await h.messages({ to: c.email })).map((m) => m.subject)).toEqual([expect.stringContaining('Your receipt')]);
});

describe('what a review found (each failed before its fix)', () => {
  test('cancelled while the charge is in flight: the charge is asked for, not taken as not sent, and the run waits for a person', async () => {
    const c = await cart();
    await h.stripeFault({ kind: 'slow', delayMs: 3000, match: { idempotencyKey: `checkout:${c.id}:charge_card` } });
    const handle = await start(c.id);
    let state = await handle.query(checkoutStateQuery);
    for (let i = 0; i < 50 && state.steps[1]!.status !== 'running'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      state = await handle.query(checkoutStateQuery);
    }
    await handle.cancel();
    await expect(handle.result()).rejects.toThrow();
    const after = await handle.query(checkoutStateQuery);
    expect(after).toMatchObject({ status: 'needs_attention', effect: { status: 'unknown' } });
    expect(after.outcome?.reason).toContain('the charge is unknown; a person reconciles it');
    // The reservation stands with the charge a person settles; the charge landed once.
    expect(await c.stock()).toEqual([3, 4]);
    await new Promise((r) => setTimeout(r, 3500));
    expect(await charges(c.id)).toHaveLength(1);
  });

  test('a charge that failed for good after an attempt that may have charged is not undone blind', async () => {
    const c = await cart();
    const key = `checkout:${c.id}:charge_card`;
    // The first charge is made and its answer lost; the provider cannot be searched, so the run parks unknown.
    await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: key } });
    await h.stripeFault({ kind: 'server_error', match: { path: '/v1/payment_intents/search' }, count: 10_000 });
    const handle = await start(c.id);
    expect((await parked(handle)).effect.status).toBe('unknown');
    // A person's retry meets only 429s: that last attempt charged nothing, but the first did.
    await h.stripeFault({ kind: 'rate_limit', match: { idempotencyKey: key }, count: 50, retryAfterSeconds: 0 });
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'retry-step', by: 'ops', reason: 'try again' }] });
    let state = await handle.query(checkoutStateQuery);
    const retried = (x: typeof state) => x.steps[1]!.ledger.some((a) => a.outcome === 'RATE_LIMIT');
    const settledAgain = (x: typeof state) => retried(x) && ['needs_attention', 'compensated'].includes(x.status);
    for (let i = 0; i < 150 && !settledAgain(state); i++) {
      await new Promise((r) => setTimeout(r, 200));
      state = await handle.query(checkoutStateQuery);
    }
    expect(state).toMatchObject({ status: 'needs_attention', effect: { status: 'unknown' } });
    expect(await c.stock()).toEqual([3, 4]);
    await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
    expect(await charges(c.id)).toHaveLength(1);
    await handle.terminate();
  });

  test('the sweep reconciles a parked checkout whose charge was made and its answer lost: it completes, charged once', async () => {
    const c = await cart();
    await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: `checkout:${c.id}:charge_card` } });
    await h.stripeFault({ kind: 'server_error', match: { path: '/v1/payment_intents/search' }, count: 10_000 });
    const handle = await start(c.id);
    expect(await parked(handle)).toMatchObject({
      effect: { status: 'unknown' },
      parked: { failedStep: 'charge_card' },
    });
    await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
    const report = await h.env.client.workflow.execute(sweepWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: `sweep-${c.id}`,
      args: [{ maxRuns: 50, waitMs: 30_000 }],
    });
    expect(report.reconciled).toContain(handle.workflowId);
    completed(await handle.result());
    expect((await handle.query(checkoutStateQuery)).decisions).toEqual([
      expect.objectContaining({ decision: 'reconcile', by: 'sweep' }),
    ]);
    expect(await charges(c.id)).toHaveLength(1);
    await expect(h.messages({ to: c.email })).resolves.toHaveLength(1);
  });

  test("a receipt the run's budget cannot pay for parks at send_receipt, and a person's retry-step sends it", async () => {
    const c = await cart();
    const policy = { ...TEST_POLICY, budget: { ...TEST_POLICY.budget, providerCalls: 1 } };
    await h.withWorker(
      {},
      async (taskQueue) => {
        const handle = await h.env.client.workflow.start(checkoutWorkflow, {
          taskQueue,
          workflowId: checkoutWorkflowId(c.id),
          args: [{ cartId: c.id, paymentMethod: 'pm_card_visa', requestedBy: 'test' }],
        });
        // The charge spent the one provider call the worker's policy allows: the receipt cannot be scheduled.
        expect(await parked(handle)).toMatchObject({
          effect: { status: 'charged' },
          parked: { failedStep: 'send_receipt', verdict: 'auto-retry is safe' },
        });
        await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'retry-step', by: 'ops', reason: 'budget' }] });
        completed(await handle.result());
      },
      { policy },
    );
    expect(await charges(c.id)).toHaveLength(1);
    await expect(h.messages({ to: c.email })).resolves.toHaveLength(1);
  });

  test('a refund of the charge the provider has not settled is waited for: the correction goes out only once it succeeded', async () => {
    const { c, handle } = await parkedAtLostReceipt('pm_card_refundPending');
    await handle.cancel();
    const charged = (state: CheckoutRunState) =>
      (state.steps[1]!.output as { paymentIntentId: string }).paymentIntentId;
    const refunds = async () => h.ledger(charged(await handle.query(checkoutStateQuery)));
    let pending = await refunds();
    for (let i = 0; i < 100 && pending.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      pending = await refunds();
    }
    // Three polls later it still waits, the correction not sent: the money is not back yet.
    await new Promise((r) => setTimeout(r, 3000));
    const waiting = await handle.query(checkoutStateQuery);
    expect(waiting).toMatchObject({ status: 'compensating' });
    expect(waiting.steps[1]!.compensation).toMatchObject({ status: 'running' });
    expect((await h.messages({ to: c.email })).map((m) => m.subject)).toEqual([
      expect.stringContaining('Your receipt'),
    ]);
    await h.settleRefund(pending[0]!.objectId);
    await expect(handle.result()).rejects.toThrow();
    const after = await handle.query(checkoutStateQuery);
    expect(after).toMatchObject({ status: 'compensated', effect: { status: 'refunded' } });
    expect(after.steps[1]!.compensation).toMatchObject({ status: 'completed', output: { status: 'succeeded' } });
    expect(await h.ledger(charged(after))).toHaveLength(1);
    const mails = await h.messages({ to: c.email });
    expect(mails.map((m) => m.subject)).toEqual([
      expect.stringContaining('Your receipt'),
      expect.stringContaining('Correction: your order'),
    ]);
    await h.recordHistory(handle.workflowId, 'checkout-refund-pending-waited');
  });

  test('a refund of the charge that failed after the provider took it gives nothing back: no correction, the run parks at the charge', async () => {
    const { c, handle } = await parkedAtLostReceipt('pm_card_refundFail');
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'compensate', by: 'ops', reason: 'x' }] });
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'checked' }] });
    let state = await handle.query(checkoutStateQuery);
    for (let i = 0; i < 100 && state.outcome?.failedStep !== 'charge_card'; i++) {
      await new Promise((r) => setTimeout(r, 200));
      state = await handle.query(checkoutStateQuery);
    }
    expect(state).toMatchObject({ status: 'needs_attention', outcome: { failedStep: 'charge_card' } });
    expect(state.steps[1]!.compensation).toMatchObject({ status: 'completed', output: { status: 'failed' } });
    // The receipt may have reached the customer, but no correction says their money is back when it is not.
    expect((await h.messages({ to: c.email })).map((m) => m.subject)).toEqual([
      expect.stringContaining('Your receipt'),
    ]);
    await handle.terminate('test over');
  });

  test('once undoing has begun, retry-step is refused: going forward would complete a checkout given back', async () => {
    const c = await cart();
    await refuseReceipt(c.email);
    await h.stripeFault({
      kind: 'server_error',
      match: { idempotencyKey: `checkout:${c.id}:charge_card:compensate` },
      count: 100,
    });
    const handle = await start(c.id);
    await parked(handle);
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'compensate', by: 'ops', reason: 'gave up' }] });
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'checked' }] });
    let state = await handle.query(checkoutStateQuery);
    for (let i = 0; i < 100 && !(state.status === 'needs_attention' && state.steps[1]!.compensation); i++) {
      await new Promise((r) => setTimeout(r, 200));
      state = await handle.query(checkoutStateQuery);
    }
    expect(state.outcome?.reason).toMatch(/Not undone: charge_card/);
    await expect(
      handle.executeUpdate(decisionUpdate, { args: [{ decision: 'retry-step', by: 'ops', reason: 'try again' }] }),
    ).rejects.toMatchObject({ cause: { message: expect.stringContaining('its compensation has begun') } });
    await handle.terminate();
  });

  test('a cart whose checkout was undone is not checked out again by replaying its keys', async () => {
    const c = await cart();
    expect(await (await start(c.id, 'pm_card_chargeDeclined')).result()).toMatchObject({ status: 'compensated' });
    const again = await h.env.client.workflow.start(checkoutWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: `${checkoutWorkflowId(c.id)}-again`,
      args: [{ cartId: c.id, paymentMethod: 'pm_card_visa', requestedBy: 'test' }],
    });
    const result = await again.result();
    expect(result).toMatchObject({ status: 'rejected', failedStep: 'reserve_stock' });
    expect((result as { reason: string }).reason).toContain('its checkout is over');
    expect(await charges(c.id)).toEqual([]);
    expect(await c.stock()).toEqual([5, 5]);
  });
});

test('a request that does not fit is rejected, nothing run', async () => {
  const handle = await h.env.client.workflow.start('checkoutWorkflow', {
    taskQueue: TASK_QUEUE,
    workflowId: `checkout-bad-${randomUUID().slice(0, 8)}`,
    args: [{ cartId: 'x', paymentMethod: '4242424242424242', requestedBy: 'test' }],
  });
  expect(await handle.result()).toMatchObject({
    status: 'rejected',
    reason: expect.stringContaining('paymentMethod: must be a Stripe PaymentMethod id'),
  });
});
