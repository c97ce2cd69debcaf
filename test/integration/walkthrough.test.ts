// The refund walk-through from the design brief, each branch driven by faults injected at exact
// boundaries of the real stack, and each asserted from where effects land: the Stripe server's
// ledger and request log, the SMTP server's mailbox, and the store.
import { WorkflowFailedError } from '@temporalio/client';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { startRefund } from '../../src/client/refunds';
import { messageIdForKey, TASK_QUEUE, type RefundRunState } from '../../src/contract';
import { findTool } from '../../tools/src/stack/tools';
import type { RefundActivities } from '../../src/activities';
import { refundWorkflow } from '../../src/workflows';
import { completed, fewLookups, refund, startHarness, stopped, TEST_POLICY, type Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const execFileAsync = promisify(execFile);
const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const request = (orderId: string, amount = 1250, operationVersion = 1) => ({
  orderId,
  amount,
  currency: 'usd',
  requestedBy: 'test',
  operationVersion,
});
const opId = (orderId: string, version = 1) => `refund:test:${orderId}:v${version}`;
const createKey = (orderId: string, version = 1) => `${opId(orderId, version)}:create_refund`;
const noticeId = (orderId: string, version = 1) => messageIdForKey(`${opId(orderId, version)}:notify_customer`);

const step = (state: RefundRunState, name: string) => state.steps.find((s) => s.name === name)!;
const posts = async (orderId: string, version = 1) =>
  (await h.requests({ idempotencyKey: createKey(orderId, version) })).filter((r) => r.method === 'POST');

describe('the refund is committed but its response is lost', () => {
  test('reconciliation finds the refund by operation id and keeps its receipt: one refund, one request, one email', async () => {
    const order = await h.seedOrder(newOrderId());
    await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey(order.id) } });
    const result = await refund(h.env.client, request(order.id));

    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect(await posts(order.id)).toEqual([expect.objectContaining({ status: null, fault: 'drop_after_commit' })]);
    expect(await h.messages({ messageId: noticeId(order.id) })).toHaveLength(1);
    expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250, status: 'partially_refunded' });

    const state = await h.state(result.workflowId);
    expect(state.status).toBe('completed');
    expect(state.reconciliation).toMatchObject({
      lookups: 1,
      lastResult: 'completed',
      resubmissions: 0,
      cursor: { method: 'list', matches: 1 },
    });
    expect(step(state, 'create_refund')).toMatchObject({
      status: 'completed',
      note: expect.stringMatching(/receipt from reconciliation/),
    });
    expect(step(state, 'create_refund').ledger).toEqual([
      expect.objectContaining({ outcome: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'response_lost' }),
    ]);
    expect(state.lastFailure).toMatchObject({
      step: 'create_refund',
      code: 'UNKNOWN_OUTCOME',
      domain: 'unknown outcome',
    });
    expect(state.recovery).toMatchObject({ action: 'reconcile', owner: 'workflow' });
    await h.recordHistory(result.workflowId, 'refund-reconciled');
  });

  test('while the list lags, a resend with the same key inside the window is answered with the first refund', async () => {
    const order = await h.seedOrder(newOrderId());
    await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey(order.id) } });
    await h.stripeFault({ kind: 'lagging_list', match: { idempotencyKey: createKey(order.id) }, lagMs: 60_000 });
    const result = await refund(h.env.client, request(order.id));

    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    const sent = await posts(order.id);
    expect(sent.map((r) => [r.status, Boolean(r.replayed)])).toEqual([
      [null, false],
      [200, true],
    ]);
    expect(result.refund.replayed).toBe(true);
    const state = await h.state(result.workflowId);
    expect(state.reconciliation).toMatchObject({ lastResult: 'not_found_inconclusive', resubmissions: 1 });
    // Every transport request the step sent is one the server saw.
    expect(step(state, 'create_refund').transportRequests).toBe(sent.length);
  });
});

test('a connection reset: every request the server sees for the step carries the same key, and the ledger counts them all', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'fail_before_commit', match: { orderId: order.id, path: '/v1/refunds' } });
  const result = await refund(h.env.client, request(order.id));

  const seen = (await h.requests({ paymentIntent: order.paymentIntentId, path: '/v1/refunds' })).filter(
    (r) => r.method === 'POST',
  );
  expect(new Set(seen.map((r) => r.idempotencyKey))).toEqual(new Set([createKey(order.id)]));
  expect(seen.map((r) => r.status)).toEqual([null, 200]);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  const state = await h.state(result.workflowId);
  expect(step(state, 'create_refund').transportRequests).toBe(seen.length);
  expect(state.budget.providerCallsUsed).toBeGreaterThanOrEqual(seen.length);
});

test('a reset opens the circuit breaker: the resubmission it refuses waits for the probe instead of parking the run', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'fail_before_commit', match: { idempotencyKey: createKey(order.id) } });
  const breaker = {
    ...TEST_POLICY,
    breaker: { enabled: true, failureThreshold: 1, windowMs: 60_000, cooldownMs: 1500, halfOpenProbes: 1 },
  };
  const [result, state] = await h.withWorker(
    {},
    async (taskQueue) => {
      const done = await h.env.client.workflow.execute(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${order.id}-v1`,
        args: [request(order.id)],
      });
      return [done, await h.state(done.workflowId)] as const;
    },
    { policy: breaker },
  );

  expect(completed(result).refund.amount).toBe(1250);
  expect((await posts(order.id)).map((r) => r.status)).toEqual([null, 200]);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  // One resubmission, refused once (nothing sent) and sent after the cooldown; the refusal said the refund might exist.
  expect(state.reconciliation).toMatchObject({ resubmissions: 1 });
  expect(step(state, 'create_refund').ledger.map((a) => [a.outcome, a.reason, a.transportRequests])).toEqual([
    ['UNKNOWN_OUTCOME', 'response_lost', 1],
    ['CAPACITY', 'circuit_open_after_uncertain_attempt', 0],
    ['ok', null, 1],
  ]);
});

test('two 429s: the server sees exactly three requests, spaced by its Retry-After, and the attempt ledger agrees', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({
    kind: 'rate_limit',
    match: { idempotencyKey: createKey(order.id) },
    retryAfterSeconds: 1,
    count: 2,
  });
  const result = await refund(h.env.client, request(order.id));

  const seen = await posts(order.id);
  expect(seen.map((r) => r.status)).toEqual([429, 429, 200]);
  for (let i = 1; i < seen.length; i++)
    expect(Date.parse(seen[i].at) - Date.parse(seen[i - 1].at)).toBeGreaterThanOrEqual(1000);
  const create = step(await h.state(result.workflowId), 'create_refund');
  expect(create.attempts).toBe(3);
  expect(create.transportRequests).toBe(3);
  expect(create.ledger.map((a) => [a.outcome, a.retryAfterMs])).toEqual([
    ['RATE_LIMIT', 1000],
    ['RATE_LIMIT', 1000],
    ['ok', null],
  ]);
  expect(create.ledger[0].nextDelayMs).toBeGreaterThanOrEqual(1000);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('5xx answers until the retries run out: the effect is uncertain, so the run reconciles before anything else', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'server_error', status: 500, match: { idempotencyKey: createKey(order.id) }, count: 5 });
  const result = await refund(h.env.client, request(order.id));

  const state = await h.state(result.workflowId);
  expect(step(state, 'create_refund').ledger.map((a) => [a.outcome, a.certainty])).toEqual([
    ...Array(5).fill(['TRANSIENT_DEPENDENCY', 'may_have_executed']),
    ['ok', 'completed'],
  ]);
  expect(state.reconciliation).toMatchObject({ lookups: 1, resubmissions: 1 });
  expect((await posts(order.id)).map((r) => r.status)).toEqual([500, 500, 500, 500, 500, 200]);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('a partial refund freezes the email and repairs the order forward to what was really refunded', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'partial', match: { idempotencyKey: createKey(order.id) } });
  const { status, state } = await stopped(startRefund(h.env.client, request(order.id)));

  expect(status).toBe('needs_attention');
  expect(state.effect).toMatchObject({ status: 'partial', certainty: 'partial' });
  expect(state.outcome?.reason).toMatch(
    /partial refund: .* 625 usd of the 1250 usd asked.*the customer was not emailed/,
  );
  expect(step(state, 'notify_customer')).toMatchObject({ status: 'skipped', note: expect.stringMatching(/frozen/) });
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(0);
  expect(await h.ledger(order.paymentIntentId)).toEqual([expect.objectContaining({ amount: 625 })]);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 625 });
  await expect(h.store.operations.get(opId(order.id))).resolves.toMatchObject({ status: 'partial' });

  // The same operation asked again replays the partial receipt: still frozen, still one refund, the order unchanged.
  const again = await stopped(
    h.env.client.workflow.start(refundWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: `again-${order.id}`,
      args: [request(order.id)],
    }),
  );
  expect(again.status).toBe('needs_attention');
  expect(again.state.effect).toMatchObject({ status: 'partial' });
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(0);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 625 });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('a refund the provider failed stays failed when the operation is asked again: no second email, no order change', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const first = await stopped(startRefund(h.env.client, request(order.id)));
  expect(first.status).toBe('compensated');
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(2);

  const again = await stopped(
    h.env.client.workflow.start(refundWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: `again-${order.id}`,
      args: [request(order.id)],
    }),
  );
  expect(again.status).toBe('needs_attention');
  expect(again.state.outcome?.reason).toMatch(/refund re_\w+ for this operation is failed: nothing was refunded/);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(2);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 0, status: 'paid' });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('compensations still run when the provider-call budget is spent', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  // create 1 + notice 1 + the gate's list and, the list lagging, its retrieve 2: nothing left for the correction email.
  await h.stripeFault({ kind: 'lagging_list', match: { idempotencyKey: createKey(order.id) }, lagMs: 60_000 });
  const spent = { ...TEST_POLICY, budget: { ...TEST_POLICY.budget, providerCalls: 4 } };
  const { status, state } = await h.withWorker(
    {},
    (taskQueue) =>
      stopped(
        h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${order.id}-v1`,
          args: [request(order.id)],
        }),
      ),
    { policy: spent },
  );
  expect(status).toBe('compensated');
  expect(state.budget.providerCallsUsed).toBeGreaterThan(4);
  expect(step(state, 'notify_customer').compensation).toMatchObject({ status: 'completed' });
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(2);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 0 });
});

test('a run cancelled while it reconciles ends Cancelled and says what it leaves behind', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey(order.id) } });
  await h.failProviderReads(order.paymentIntentId);
  const handle = await h.env.client.workflow.start(refundWorkflow, {
    taskQueue: TASK_QUEUE,
    workflowId: `refund-${order.id}-v1`,
    args: [request(order.id)],
  });
  for (let i = 0; i < 100 && (await h.state(handle.workflowId)).status !== 'reconciling'; i++)
    await new Promise((r) => setTimeout(r, 100));
  await handle.cancel();
  const err = await handle.result().catch((e: unknown) => e);
  expect((err as WorkflowFailedError).cause?.name).toBe('CancelledFailure');
  const described = await handle.describe();
  expect(described.status.name).toBe('CANCELLED');
  // Closed, and still among the runs a person must look at.
  expect(described.searchAttributes).toMatchObject({
    RefundStatus: ['needs_attention'],
    RefundNeedsAttention: [true],
    RefundEffect: ['unknown'],
  });
  const trail = await h.store.operations.auditTrail(opId(order.id));
  expect(trail.at(-1)).toMatchObject({
    event: 'run_stopped',
    detail: { reason: expect.stringMatching(/cancelled while reconciling; the refund is unknown/) },
  });
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
});

test('an outcome that stays unknown stays unknown: no claim, no email, no order change, polled within budget, handed to a person', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey(order.id) } });
  await h.failProviderReads(order.paymentIntentId);
  const lookups = fewLookups(3);
  const { status, state } = await h.withWorker(
    {},
    (taskQueue) =>
      stopped(
        h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${order.id}-v1`,
          args: [request(order.id)],
        }),
      ),
    { policy: lookups },
  );

  expect(status).toBe('needs_attention');
  expect(state.effect).toMatchObject({ status: 'unknown' });
  expect(state.outcome?.reason).toMatch(/the refund's outcome is unknown: still unknown after 3 lookups/);
  expect(state.outcome?.reason).not.toMatch(/Nothing was refunded|completed/);
  expect(state.reconciliation).toMatchObject({ lookups: 3, lastResult: 'unknown' });
  // The budget is charged each request the Stripe server saw once: every lookup's, and the create's.
  expect(state.budget.providerCallsUsed).toBe((await h.requests({ paymentIntent: order.paymentIntentId })).length);
  expect(state.steps.slice(2).every((s) => s.status === 'pending')).toBe(true);
  // It did happen, and the run does not pretend otherwise: the order and the customer wait for a person.
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(0);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 0 });
  await expect(h.store.operations.get(opId(order.id))).resolves.toMatchObject({ status: 'unknown' });
  const described = await h.env.client.workflow.getHandle(`refund-${order.id}-v1`).describe();
  expect(described.searchAttributes).toMatchObject({
    RefundStatus: ['needs_attention'],
    RefundStep: ['create_refund'],
  });
  await h.recordHistory(`refund-${order.id}-v1`, 'refund-unknown');
});

test('an order-update version conflict reloads the order and applies again; the refund is never sent again', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.storeFault('conflict', order.id, 2);
  const result = await refund(h.env.client, request(order.id));

  const state = await h.state(result.workflowId);
  expect(step(state, 'update_order').ledger.map((a) => a.outcome)).toEqual(['STATE_CONFLICT', 'STATE_CONFLICT', 'ok']);
  expect(step(state, 'create_refund')).toMatchObject({ attempts: 1, transportRequests: 1 });
  expect(await posts(order.id)).toHaveLength(1);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  // The competing writer's two version bumps stay; ours came on top, once.
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250, version: 4 });
});

test('an email rate limit retries the email alone, honouring the wait the server asked for', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.mailFault({
    kind: 'reply',
    stage: 'rcpt',
    code: 450,
    message: '4.7.0 rate limited, retry after 1s',
    match: { recipient: order.customerEmail },
    count: 2,
  });
  const result = await refund(h.env.client, request(order.id));

  const state = await h.state(result.workflowId);
  const notify = step(state, 'notify_customer');
  expect(notify.ledger.map((a) => [a.outcome, a.retryAfterMs])).toEqual([
    ['RATE_LIMIT', 1000],
    ['RATE_LIMIT', 1000],
    ['ok', null],
  ]);
  for (let i = 1; i < notify.ledger.length; i++) {
    expect(Date.parse(notify.ledger[i].startedAt) - Date.parse(notify.ledger[i - 1].startedAt)).toBeGreaterThanOrEqual(
      1000,
    );
  }
  for (const other of ['load_order', 'create_refund', 'update_order']) expect(step(state, other).attempts).toBe(1);
  expect(await h.messages({ messageId: noticeId(order.id) })).toHaveLength(1);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

describe('the same operation under another workflow id', () => {
  test('a concurrent second start under another id refunds once and mails once', async () => {
    const order = await h.seedOrder(newOrderId());
    const other = h.env.client.workflow
      .execute(refundWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: `refund-copy-${randomUUID()}`,
        args: [request(order.id)],
      })
      .then(completed);
    const [a, b] = await Promise.all([refund(h.env.client, request(order.id)), other]);
    expect(b.refund.refundId).toBe(a.refund.refundId);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
    expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250 });
  });

  test('started from the temporal CLI under another workflow id, it returns the first refund and sends nothing', async () => {
    const order = await h.seedOrder(newOrderId());
    const first = await refund(h.env.client, request(order.id));
    const workflowId = `cli-${randomUUID()}`;
    // Asynchronously: the worker answering the CLI's query runs in this process.
    const cli = async (...args: string[]) =>
      (
        await execFileAsync(
          findTool('temporal'),
          [...args, '--address', h.env.address, '--namespace', h.namespace, '--codec-endpoint', h.codecUrl],
          { encoding: 'utf8' },
        )
      ).stdout;
    await cli(
      'workflow',
      'start',
      '--type',
      'refundWorkflow',
      '--task-queue',
      TASK_QUEUE,
      '--workflow-id',
      workflowId,
      '--input',
      JSON.stringify(request(order.id)),
    );
    const result = await h.env.client.workflow.getHandle(workflowId).result();

    expect(result).toMatchObject({
      status: 'completed',
      operationId: opId(order.id),
      refund: { refundId: first.refund.refundId },
    });
    expect(await posts(order.id)).toHaveLength(1);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
    expect(
      JSON.parse(await cli('workflow', 'query', '--workflow-id', workflowId, '--type', 'steps', '--output', 'json'))
        .queryResult[0],
    ).toMatchObject({
      operation: { operationId: opId(order.id), recordedByThisRun: false },
    });
  });

  /** A run on a worker whose activities `overrides` replace, stopped by its completion gate for a person. */
  async function stoppedAtGate(orderId: string, overrides: Partial<RefundActivities>) {
    const { status, state } = await h.withWorker(overrides, (taskQueue) =>
      stopped(
        h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${orderId}-v1`,
          args: [request(orderId)],
        }),
      ),
    );
    expect(status).toBe('needs_attention');
    expect(state.outcome).toMatchObject({ failedStep: 'completion_gate' });
    return state;
  }

  test('a run whose order update only claims success is stopped by the completion gate', async () => {
    const order = await h.seedOrder(newOrderId());
    const claimed = async () => ({
      orderId: order.id,
      status: 'partially_refunded' as const,
      refundedAmount: 1250,
      version: 2,
      changed: true,
      evidence: { attempt: 1, ledger: [] },
    });
    // A store fault armed for the order keeps its update off the refund's receipt: the step runs as its own task.
    await h.storeFault('conflict', order.id, 1);
    const state = await stoppedAtGate(order.id, { applyRefund: claimed });
    expect(state.outcome?.reason).toMatch(/order_refund_state: the order records no refund for this operation/);
    expect(state.outcome?.reason).toMatch(/audit_trail: missing order_updated/);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  });

  test('a run whose notice only claims it was sent is stopped by the completion gate', async () => {
    const order = await h.seedOrder(newOrderId());
    // The notice claims it was sent, and sends and records nothing.
    const claimed = async (input: { key: string }) => ({
      key: input.key,
      messageId: `<${input.key}@durable-refunds.local>`,
      recipient: 'o***@example.test',
      providerResponse: '250 OK',
      alreadySent: false,
      evidence: { attempt: 1, ledger: [] },
    });
    const state = await stoppedAtGate(order.id, { sendRefundNotice: claimed });
    expect(state.outcome?.reason).toMatch(/notification_state: no notice in the outbox/);
    expect(state.outcome?.reason).toMatch(/audit_trail: missing notification_sent/);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect(await h.messages({ to: order.customerEmail })).toHaveLength(0);
  });
});

describe('an earlier operation whose outcome is unknown fences the next version', () => {
  async function unknownV1(orderId: string) {
    const order = await h.seedOrder(orderId);
    await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey(orderId) } });
    const listing = {
      kind: 'server_error' as const,
      status: 500,
      match: { method: 'GET' as const, paymentIntent: order.paymentIntentId },
      count: 1000,
    };
    await h.stripeFault(listing);
    const lookups = fewLookups(2);
    const run = (version: number) => (taskQueue: string) =>
      h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${orderId}-v${version}`,
        args: [request(orderId, 1000, version)],
      });
    await h.withWorker({}, (q) => stopped(run(1)(q)), { policy: lookups });
    await expect(h.store.operations.get(opId(orderId))).resolves.toMatchObject({ status: 'unknown' });
    return { order, run, lookups };
  }

  test('v1 turns out to have refunded: v2 records it on the order and stops without sending; asked again, v2 goes ahead', async () => {
    const { order, run } = await unknownV1(newOrderId());
    await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
    const first = await stopped(run(2)(TASK_QUEUE));

    expect(first.status).toBe('needs_attention');
    expect(first.state.outcome?.reason).toMatch(
      new RegExp(
        `earlier operation ${opId(order.id, 1)} turned out to have refunded 1000 usd .* it is now recorded on the order`,
      ),
    );
    expect(first.state.reconciliation.history[0]).toMatchObject({
      operationId: opId(order.id, 1),
      result: 'completed',
    });
    expect(await posts(order.id, 2)).toHaveLength(0);
    expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1000 });
    await expect(h.store.operations.get(opId(order.id))).resolves.toMatchObject({ status: 'refunded' });

    // A person who still wants v2 asks again: it is checked against what is really left.
    const again = completed(
      await h.env.client.workflow.execute(refundWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: `refund-${order.id}-v2-again`,
        args: [request(order.id, 1000, 2)],
      }),
    );
    expect(again.order).toMatchObject({ refundedAmount: 2000 });
    expect((await h.ledger(order.paymentIntentId)).map((e) => e.idempotencyKey)).toEqual([
      createKey(order.id, 1),
      createKey(order.id, 2),
    ]);
  });

  test('v1 proven never to have happened is settled: v2 refunds, and v1 can never be sent after it', async () => {
    const order = await h.seedOrder(newOrderId());
    await h.stripeFault({ kind: 'fail_before_commit', match: { idempotencyKey: createKey(order.id) } });
    await h.failProviderReads(order.paymentIntentId);
    const start =
      (version: number, workflowId = `refund-${order.id}-v${version}`) =>
      (taskQueue: string) =>
        h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId,
          args: [request(order.id, 1000, version)],
        });
    await h.withWorker({}, (q) => stopped(start(1)(q)), { policy: fewLookups(2) });
    await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });

    const v2 = await (await start(2)(TASK_QUEUE)).result();
    expect(v2.status).toBe('completed');
    const state = await h.state(v2.workflowId);
    expect(state.reconciliation.history.map((l) => [l.operationId, l.result])).toContainEqual([
      opId(order.id, 1),
      'not_started_confirmed',
    ]);
    await expect(h.store.operations.get(opId(order.id))).resolves.toMatchObject({
      status: 'intent',
      requestsSent: 1,
      provenAbsentThrough: 1,
    });

    const v1Again = await stopped(start(1, `refund-${order.id}-v1-again`)(TASK_QUEUE));
    expect(v1Again.status).toBe('rejected');
    expect(v1Again.state.outcome?.reason).toMatch(
      /has a later operation, .*:v2: this earlier one is not sent after it/,
    );
    expect((await h.ledger(order.paymentIntentId)).map((e) => e.idempotencyKey)).toEqual([createKey(order.id, 2)]);
  });

  test('an earlier version that never sent never sends once a later one exists, and no new version may come in below it', async () => {
    const order = await h.seedOrder(newOrderId());
    const intent = (version: number, amount: number) => ({
      operationId: opId(order.id, version),
      orderId: order.id,
      operationVersion: version,
      scope: 'test',
      requestHash: `h${version}`,
      request: { orderId: order.id, amount, currency: 'usd', reason: 'requested_by_customer' },
      actor: 'a run that died before sending',
    });
    await h.store.operations.commitIntent(intent(1, 1000));
    const v2 = await h.env.client.workflow.execute(refundWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: `refund-${order.id}-v2`,
      args: [request(order.id, 1000, 2)],
    });
    expect(v2.status).toBe('completed');
    const v1 = await stopped(
      h.env.client.workflow.start(refundWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: `refund-${order.id}-v1`,
        args: [request(order.id, 1000, 1)],
      }),
    );
    expect(v1.status).toBe('rejected');

    // v4 recorded and sent, its outcome not settled: v3, new and below it, is refused before anything is recorded for it.
    await h.store.operations.commitIntent(intent(4, 500));
    await h.store.operations.markSent(opId(order.id, 4), 'another run', 11_000);
    const v3 = await stopped(
      h.env.client.workflow.start(refundWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: `refund-${order.id}-v3`,
        args: [request(order.id, 500, 3)],
      }),
    );
    expect(v3.status).toBe('rejected');
    expect(v3.state.outcome?.reason).toMatch(/already has operation .*:v4; a new operation needs a version above it/);
    await expect(h.store.operations.get(opId(order.id, 3))).resolves.toBeUndefined();
    expect((await h.ledger(order.paymentIntentId)).map((e) => e.idempotencyKey)).toEqual([createKey(order.id, 2)]);
  });

  test('v2 sends nothing while v1 stays unknown, and says why', async () => {
    const { order, run, lookups } = await unknownV1(newOrderId());
    const { status, state } = await h.withWorker({}, (q) => stopped(run(2)(q)), { policy: lookups });

    expect(status).toBe('needs_attention');
    expect(state.outcome?.reason).toMatch(
      new RegExp(`earlier operation ${opId(order.id, 1)} on order ${order.id} has an unknown outcome`),
    );
    expect(await posts(order.id, 2)).toHaveLength(0);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  });
});

test('a run that outspends its provider-call budget stops with BUDGET_EXCEEDED and the reason', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({
    kind: 'rate_limit',
    match: { idempotencyKey: createKey(order.id) },
    retryAfterSeconds: 0,
    count: 2,
  });
  const tight = { ...TEST_POLICY, budget: { ...TEST_POLICY.budget, providerCalls: 3 } };
  const { status, state } = await h.withWorker(
    {},
    (taskQueue) =>
      stopped(
        h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${order.id}-v1`,
          args: [request(order.id)],
        }),
      ),
    { policy: tight },
  );
  expect(status).toBe('needs_attention');
  expect(step(state, 'notify_customer').error).toMatchObject({
    code: 'BUDGET_EXCEEDED',
    reason: 'run_budget',
    message: '3 provider requests sent, of 3 allowed',
  });
  expect(state.budget).toMatchObject({ providerCallsUsed: 3, providerCallLimit: 3 });
  expect(state.outcome?.reason).toMatch(/stands and is never sent again/);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(0);
});

describe('a run started again from the temporal CLI', () => {
  test('the same input under a finished workflow id returns the first result, and another amount is refused outright', async () => {
    const order = await h.seedOrder(newOrderId());
    const first = await refund(h.env.client, request(order.id));
    // The temporal CLI's default reuse policy allows a new run under a closed workflow id.
    const again = await h.env.client.workflow.execute(refundWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: first.workflowId,
      args: [request(order.id)],
    });
    expect(again).toMatchObject({
      status: 'completed',
      refund: { refundId: first.refund.refundId },
      order: { changed: false },
      notification: { alreadySent: true },
    });

    const changed = await stopped(
      h.env.client.workflow.start(refundWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: first.workflowId,
        args: [request(order.id, 2000)],
      }),
    );
    expect(changed.status).toBe('rejected');
    expect(changed.state.outcome?.reason).toMatch(
      /first requested as 1250 usd .* is a changed intent and needs a new operation version/,
    );
    expect(changed.state.outcome?.reason).not.toMatch(/unknown/);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  });
});
