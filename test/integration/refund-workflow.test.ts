// The refund saga on a real Temporal dev server, with the real local Stripe-compatible and
// SMTP servers and a real SQLite store behind the activities.
import { ApplicationFailure } from '@temporalio/common';
import { randomUUID } from 'node:crypto';
import { startRefund } from '../../src/client/refunds';
import { ConflictingRefundError } from '../../src/temporal/client';
import { InvalidRefundRequestError } from '../../src/domain/refund-request';
import { stepsQuery } from '../../src/contract';
import { temporalRetryPolicy } from '../../src/reliability/policy';
import { stackTraceQuery } from '@temporalio/workflow';
import { refundWorkflow } from '../../src/workflows';
import { refund, startHarness, stopped, TEST_POLICY, type Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const request = (orderId: string, amount = 1250) => ({ orderId, amount, currency: 'usd', requestedBy: 'test' });

test('a refund runs every step once and reports them in the step table', async () => {
  const order = await h.seedOrder(newOrderId());
  const result = await refund(h.env.client, request(order.id));

  expect(result.status).toBe('completed');
  expect(result.order).toMatchObject({ status: 'partially_refunded', refundedAmount: 1250, changed: true });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ messageId: result.notification.messageId })).toHaveLength(1);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250, status: 'partially_refunded' });

  const state = await h.env.client.workflow.getHandle(result.workflowId).query(stepsQuery);
  expect(state.status).toBe('completed');
  expect(state.steps.map((s) => [s.name, s.status])).toEqual([
    ['load_order', 'completed'],
    ['create_refund', 'completed'],
    ['update_order', 'completed'],
    ['notify_customer', 'completed'],
    ['completion_gate', 'completed'],
  ]);
  for (const step of state.steps) {
    expect(step.attempts).toBe(1);
    expect(step.ledger).toEqual([expect.objectContaining({ attempt: 1, outcome: 'ok' })]);
    expect(Date.parse(step.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(step.startedAt!));
  }
  // Provider requests: one create, one notice, and the gate's list (which shows the refund: no retrieve).
  expect(state.steps.map((s) => s.transportRequests)).toEqual([0, 1, 0, 1, 1]);
  // The order update rode in the refund's receipt transaction: no task of its own, load_order the one local activity.
  const { events } = await h.env.client.workflow.getHandle(result.workflowId).fetchHistory();
  expect(events!.filter((e) => e.markerRecordedEventAttributes)).toHaveLength(1);
  expect(
    (await h.store.operations.attempts(`refund:test:${order.id}:v1:update_order`, state.runId)).map((a) => a.outcome),
  ).toEqual(['ok']);
  // The gate's first look rode in the notice's activity, once the notice was recorded sent: no task of its own.
  const scheduled = events!.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
  expect(scheduled).toEqual(['createRefund', 'sendRefundNotice']);
  await h.recordHistory(result.workflowId, 'refund-completed-read-first');
  expect(state.operation).toMatchObject({
    operationId: `refund:test:${order.id}:v1`,
    operationVersion: 1,
    scope: 'test',
    requestHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    recordedByThisRun: true,
    expectedReceipt: expect.stringContaining(order.paymentIntentId),
  });
  const sentAt = Date.parse(state.steps[1].ledger[0].startedAt);
  expect(Date.parse(state.operation!.dedupeWindowExpiresAt!)).toBe(sentAt + h.settings.provider.dedupeWindowMs);
  expect(state.effect).toEqual({ status: 'refunded', certainty: 'completed', refundId: result.refund.refundId });
  expect(state.budget).toMatchObject({ providerCallsUsed: 3, retryTimeUsedMs: 0 });
  const create = state.steps[1];
  expect(create.idempotencyKey).toBe(`refund:test:${order.id}:v1:create_refund`);
  expect(create.input).toMatchObject({ amount: 1250, idempotencyKey: create.idempotencyKey });
  expect(create.output).toMatchObject({ refundId: result.refund.refundId });
  // The key derived in workflow code is the one the provider saw.
  expect((await h.ledger(order.paymentIntentId))[0].idempotencyKey).toBe(create.idempotencyKey);
  // Customer addresses never leave the store: not in the query, not in the result.
  expect(JSON.stringify(state)).not.toContain(order.customerEmail);
  expect(JSON.stringify(result)).not.toContain(order.customerEmail);
  expect(state.steps[0].output).toMatchObject({
    order: { customerEmail: expect.stringMatching(/^o\*\*\*@example\.test$/) },
  });
  const trail = await h.store.operations.auditTrail(result.operationId);
  expect(trail.map((e) => e.event)).toEqual([
    'intent_committed',
    'refund_request_sent',
    'refund_confirmed',
    'order_updated',
    'notification_sent',
    'completion_gate_passed',
  ]);

  const described = await h.env.client.workflow.getHandle(result.workflowId).describe();
  expect(described.searchAttributes).toMatchObject({
    RefundOrderId: [order.id],
    RefundStatus: ['completed'],
    RefundStep: ['completion_gate'],
  });

  // refund-completed.json is the 1.0 recording (its policy pinned whole); this one pins it as changes.
  await h.recordHistory(result.workflowId, 'refund-completed-pinned-policy');
});

test("a first look by the gate that fails in the notice's activity is the gate task's to repeat, its request charged", async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'server_error', match: { method: 'GET', paymentIntent: order.paymentIntentId } });
  // Three attempts a step: the gate task gets the two the first look left.
  const policy = { ...TEST_POLICY, budget: { ...TEST_POLICY.budget, maxStepAttempts: 3 } };
  const { result, state, events } = await h.withWorker(
    {},
    async (taskQueue) => {
      const handle = await h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${order.id}-v1`,
        args: [request(order.id)],
      });
      const done = await handle.result();
      return { result: done, state: await handle.query(stepsQuery), events: (await handle.fetchHistory()).events! };
    },
    { policy },
  );

  expect(result.status).toBe('completed');
  const scheduled = events.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
  expect(scheduled).toEqual(['createRefund', 'sendRefundNotice', 'checkCompletion']);
  const gateTask = events!.find(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'checkCompletion',
  );
  const { maximumAttempts } = temporalRetryPolicy(policy, 'stripe', policy.budget.maxStepAttempts - 1);
  expect(maximumAttempts).toBeLessThan(temporalRetryPolicy(policy, 'stripe').maximumAttempts);
  expect(gateTask!.activityTaskScheduledEventAttributes!.retryPolicy!.maximumAttempts).toBe(maximumAttempts);
  const gate = state.steps.find((s) => s.name === 'completion_gate')!;
  expect(gate.ledger.map((a) => [a.outcome, a.transportRequests])).toEqual([
    ['TRANSIENT_DEPENDENCY', 1],
    ['ok', 1],
  ]);
  expect(gate).toMatchObject({ status: 'completed', attempts: 2, transportRequests: 2 });
  expect(state.budget).toMatchObject({ providerCallsUsed: 4 });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
});

test('asking again for the same refund returns the first run and refunds once', async () => {
  const order = await h.seedOrder(newOrderId());
  const [a, b] = await Promise.all([refund(h.env.client, request(order.id)), refund(h.env.client, request(order.id))]);
  const c = await refund(h.env.client, { ...request(order.id), requestedBy: 'someone else' });

  expect(b.refund.refundId).toBe(a.refund.refundId);
  expect(c.refund.refundId).toBe(a.refund.refundId);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250 });
});

test('a start that creates the run reads nothing back; attaching to an existing run reads its request to compare', async () => {
  const order = await h.seedOrder(newOrderId());
  const reads = jest.spyOn(h.env.client.workflowService, 'getWorkflowExecutionHistory');
  try {
    const first = await startRefund(h.env.client, request(order.id));
    expect(reads).not.toHaveBeenCalled();
    // Started running: the run's first workflow task need not upsert its status (bulkheads.test.ts counts the events).
    expect((await first.handle.describe()).searchAttributes).toMatchObject({
      RefundStatus: ['running'],
      RefundOrderId: [order.id],
    });
    const again = await startRefund(h.env.client, request(order.id));
    expect(reads).toHaveBeenCalledTimes(1);
    expect((await again.handle.result()).status).toBe('completed');
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  } finally {
    reads.mockRestore();
  }
});

test('a changed intent under the same operation version is refused; a new version is a new refund', async () => {
  const order = await h.seedOrder(newOrderId());
  await refund(h.env.client, request(order.id, 1000));
  await expect(startRefund(h.env.client, request(order.id, 2000))).rejects.toThrow(ConflictingRefundError);
  await expect(startRefund(h.env.client, request(order.id, 2000))).rejects.toThrow(/operation-version 2/);

  const second = await refund(h.env.client, { ...request(order.id, 2000), operationVersion: 2 });
  expect(second.order.refundedAmount).toBe(3000);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(2);
});

test('a bad request is refused at the client and starts nothing', async () => {
  const orderId = newOrderId();
  await expect(startRefund(h.env.client, { orderId, amount: -1, currency: 'usd', requestedBy: 't' })).rejects.toThrow(
    InvalidRefundRequestError,
  );
  await expect(h.env.client.workflow.getHandle(`refund-${orderId}-v1`).describe()).rejects.toThrow(/not found/i);
});

test('a refund for an unknown order is rejected before anything happens', async () => {
  const { status, state } = await stopped(startRefund(h.env.client, request(newOrderId())));
  expect(status).toBe('rejected');
  expect(state.outcome).toMatchObject({ status: 'rejected', failedStep: 'load_order' });
  expect(state.steps[0].error).toMatchObject({
    code: 'PERMANENT_BUSINESS',
    reason: 'order_not_found',
    certainty: 'not_executed',
  });
  expect(state.steps.slice(1).every((s) => s.status === 'pending')).toBe(true);
});

test('more than is refundable is rejected in the workflow and never reaches the provider', async () => {
  const order = await h.seedOrder(newOrderId(), { amount: 1000 });
  const started = await startRefund(h.env.client, request(order.id, 1001));
  const { status, state } = await stopped(started);
  expect(status).toBe('rejected');
  expect(state.outcome?.reason).toMatch(/exceeds the 1000 still refundable/);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(0);
  await h.recordHistory(started.handle.workflowId, 'refund-rejected');
});

test('a permanently rejected notification leaves the refund standing and asks for forward repair', async () => {
  const order = await h.seedOrder(newOrderId(), { customerEmail: 'reject-me@example.test' });
  const { status, state } = await stopped(startRefund(h.env.client, request(order.id)));

  expect(status).toBe('needs_attention');
  expect(state.outcome).toMatchObject({ failedStep: 'notify_customer' });
  expect(state.lastFailure).toMatchObject({
    step: 'notify_customer',
    code: 'PERMANENT_BUSINESS',
    reason: 'recipient_rejected',
    certainty: 'not_executed',
  });
  expect(state.recovery).toMatchObject({ action: 'stop' });
  expect(state.outcome?.reason).toMatch(/stands and is never sent again/);
  expect(JSON.stringify(state)).not.toContain('reject-me@');
  // Nothing is undone: the refund happened and the order says so.
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250 });
  expect(state.steps.find((s) => s.name === 'update_order')?.compensation).toBeUndefined();
  // The gate's first look was asked of the notice's activity, which made none and left no row of it.
  const gateKey = `${state.operation!.operationId}:create_refund#gate`;
  expect(await h.store.operations.attempts(gateKey, state.runId)).toEqual([]);
});

test('a refund the provider later fails is compensated in reverse order, each under its own key', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const { status, state } = await stopped(startRefund(h.env.client, request(order.id)));

  expect(status).toBe('compensated');
  expect(state.outcome).toMatchObject({ status: 'compensated', failedStep: 'completion_gate' });
  expect(state.effect).toMatchObject({ status: 'failed', certainty: 'completed' });
  const byName = Object.fromEntries(state.steps.map((s) => [s.name, s]));
  expect(byName.notify_customer.compensation).toMatchObject({ kind: 'compensation', status: 'completed' });
  expect(byName.update_order.compensation).toMatchObject({ kind: 'compensation', status: 'completed' });
  expect(byName.create_refund.compensation).toMatchObject({ kind: 'forward_repair', status: 'not_compensable' });
  expect(byName.notify_customer.compensation?.key).toBe(`${byName.notify_customer.idempotencyKey}:compensate`);
  // One key per step: the order update's step table, attempt ledger and compensation all use its step key.
  expect(byName.update_order.idempotencyKey).toBe(`${state.operation!.operationId}:update_order`);
  expect(byName.update_order.compensation?.key).toBe(`${byName.update_order.idempotencyKey}:compensate`);
  // Reverse order: the correction went out before the order was restored.
  expect(Date.parse(byName.notify_customer.compensation!.finishedAt!)).toBeLessThanOrEqual(
    Date.parse(byName.update_order.compensation!.startedAt!),
  );

  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 0, status: 'paid' });
  await h.recordHistory(`refund-${order.id}-v1`, 'refund-compensated');
  const mails = await h.messages({ to: order.customerEmail });
  expect(mails).toHaveLength(2);
  expect(new Set(mails.map((m) => m.messageId)).size).toBe(2);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

describe('failures decided by the recovery policy', () => {
  const failing = (code: string, certainty: string, message: string) => async () => {
    throw ApplicationFailure.create({
      type: code,
      message,
      nonRetryable: true,
      details: [{ code, certainty, reason: 'injected', ledger: [] }],
    });
  };
  /** Starts the run on the test worker's queue and waits, while that worker polls, until it ends or parks. */
  const start = (taskQueue: string, orderId: string) =>
    stopped(
      h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${orderId}-v1`,
        args: [request(orderId)],
      }),
    );

  test('an unverifiable refund is left standing, not compensated', async () => {
    const order = await h.seedOrder(newOrderId());
    const { status, state } = await h.withWorker(
      { checkCompletion: failing('PERMISSION_DENIED', 'not_executed', 'key revoked') },
      (q) => start(q, order.id),
    );

    expect(status).toBe('needs_attention');
    expect(state.outcome?.reason).toMatch(/stands and is never sent again; a person must finish completion_gate/);
    expect(state.steps.every((s) => s.compensation === undefined)).toBe(true);
    expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250 });
    expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  });

  test("a parked run's stack trace names the saga's source files and lines, through the bundle's source map", async () => {
    const order = await h.seedOrder(newOrderId());
    const over = { checkCompletion: failing('PERMISSION_DENIED', 'not_executed', 'key revoked') };
    const trace = await h.withWorker(over, async (taskQueue) => {
      const handle = await h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${order.id}-v1`,
        args: [request(order.id)],
      });
      await stopped(handle);
      return handle.query(stackTraceQuery);
    });
    expect(trace).toMatch(/src\/saga\/workflow\/[a-z-]+\.ts:\d+/);
  });

  test('with one provider call left, the completion gate (two requests an attempt) is refused for its budget, not sent', async () => {
    const order = await h.seedOrder(newOrderId());
    const policy = { ...TEST_POLICY, budget: { ...TEST_POLICY.budget, providerCalls: 3 } };
    const { status, state } = await h.withWorker({}, (q) => start(q, order.id), { policy });

    expect(status).toBe('needs_attention');
    expect(state.outcome).toMatchObject({ failedStep: 'completion_gate' });
    expect(state.outcome?.reason).toMatch(/BUDGET_EXCEEDED .*too few left for one attempt of 2/);
    expect(state.budget.providerCallsUsed).toBeLessThanOrEqual(3);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  });

  test('an activity that returns nothing stops the run honestly instead of failing its workflow task forever', async () => {
    const order = await h.seedOrder(newOrderId());
    const parkedEntry = async () =>
      (await h.store.operations.auditTrail(`refund:test:${order.id}:v1`)).find((e) => e.event === 'run_parked');
    // A store fault armed for the order keeps its update off the refund's receipt: the step runs as its own task.
    await h.storeFault('conflict', order.id, 1);
    const { status, state } = await h.withWorker({ applyRefund: (async () => undefined) as never }, async (q) => {
      const parked = await start(q, order.id);
      // The parking's audit is an activity on this worker's queue: wait for it before the worker stops.
      for (let i = 0; i < 100 && !(await parkedEntry()); i++) await new Promise((r) => setTimeout(r, 100));
      return parked;
    });
    expect(status).toBe('needs_attention');
    expect(state.steps.find((s) => s.name === 'update_order')).toMatchObject({
      status: 'failed',
      error: { code: 'POISON', reason: 'result_unusable' },
    });
    expect(state.outcome?.reason).toMatch(/stands and is never sent again/);
    // The parked run's verdict reaches the audit trail.
    expect(await parkedEntry()).toMatchObject({
      detail: { status: 'needs_attention', failedStep: 'update_order', verdict: 'stop and hand to a person' },
    });
  });
});
