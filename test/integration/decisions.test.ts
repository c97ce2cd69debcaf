// Parked runs and the decisions that move them on, on the real stack: a run that needs a person
// stays Running with its finished steps, waits for a `decide` Update, and repeats no effect.
// A parked run cancelled, and a run cancelled before its refund was sent, are workflow decisions
// (test/workflow/decisions.test.ts, lifecycle.test.ts); the store's audit of a cancelled run is in walkthrough.
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { decisionUpdate, messageIdForKey, providerEventSignal, stepsQuery, TASK_QUEUE } from '../../src/contract';
import { startRefund } from '../../src/client/refunds';
import { inspectRun } from '../../src/inspect/inspection';
import { findTool } from '../../tools/src/stack/tools';
import { refundWorkflow } from '../../src/workflows';
import { completed, fewLookups, startHarness, stopped, TEST_POLICY, type Harness } from '../helpers/harness';

const execFileAsync = promisify(execFile);
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});
afterEach(() => fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' }));

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const request = (orderId: string) => ({ orderId, amount: 1250, currency: 'usd', requestedBy: 'test' });
const opId = (orderId: string) => `refund:test:${orderId}:v1`;
const clearFaults = () => fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });

/** A run parked at the completion gate: the provider cannot be read there, after the refund, the order and the email are done. */
async function parkedAtGate() {
  const order = await h.seedOrder(newOrderId());
  // Listing the payment intent's refunds fails: only the gate lists them on this path.
  await h.failProviderReads(order.paymentIntentId);
  const { handle } = await startRefund(h.env.client, request(order.id));
  const { status, state } = await stopped(handle);
  expect(status).toBe('needs_attention');
  return { order, handle, state };
}

describe('a run that needs a person parks', () => {
  test('it stays Running with its verdict, is found by RefundNeedsAttention, and retry-step repeats no earlier effect', async () => {
    // The gate's list fails from the start: the refund, the order update and the email happen once before it parks.
    const { order, handle, state } = await parkedAtGate();
    const status = state.status;

    expect(status).toBe('needs_attention');
    expect(state.parked).toMatchObject({
      failedStep: 'completion_gate',
      verdict: 'auto-retry is safe',
      nextAction: expect.stringMatching(/^retry-step completion_gate/),
      decidedBy: expect.arrayContaining(['ops']),
    });
    expect(state.steps.slice(0, 4).map((s) => s.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
    const described = await handle.describe();
    expect(described.status.name).toBe('RUNNING');
    expect(described.searchAttributes).toMatchObject({
      RefundNeedsAttention: [true],
      RefundStatus: ['needs_attention'],
      RefundVerdict: ['auto-retry is safe'],
      RefundStep: ['completion_gate'],
    });
    const listed: string[] = [];
    for (let i = 0; i < 50 && !listed.includes(handle.workflowId); i++) {
      for await (const w of h.env.client.workflow.list({
        query: `RefundNeedsAttention = true AND RefundOrderId = '${order.id}'`,
      }))
        listed.push(w.workflowId);
      if (!listed.includes(handle.workflowId)) await new Promise((r) => setTimeout(r, 200));
    }
    expect(listed).toContain(handle.workflowId);

    await clearFaults();
    const decision = await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
      updateId: 'retry-1',
    });
    expect(decision).toMatchObject({ seq: 1, decision: 'retry-step', step: 'completion_gate', outcome: 'applied' });
    const result = await handle.result();
    expect(result.status).toBe('completed');

    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
    expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250, version: 2 });
    const after = await handle.query(stepsQuery);
    expect(after.decisions).toEqual([
      expect.objectContaining({
        decision: 'retry-step',
        by: 'ops',
        reason: 'Stripe reads are back',
        at: expect.any(String),
      }),
    ]);
    expect(after.steps.slice(0, 4).map((s) => s.attempts)).toEqual([1, 1, 1, 1]);
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundNeedsAttention: [false],
      RefundStatus: ['completed'],
    });
    const trail = (await h.store.operations.auditTrail(opId(order.id))).map((e) => e.event);
    expect(trail).toEqual(expect.arrayContaining(['run_parked', 'decision', 'completion_gate_passed']));
    await h.recordHistory(handle.workflowId, 'refund-parked-then-decided');
  });

  test('a decision gives the run a fresh budget: a run parked for its spent provider calls completes on retry-step', async () => {
    const order = await h.seedOrder(newOrderId());
    // create 1 + notice 1: the gate finds the budget spent.
    const tight = { ...TEST_POLICY, budget: { ...TEST_POLICY.budget, providerCalls: 2 } };
    const result = await h.withWorker(
      {},
      async (taskQueue) => {
        const handle = await h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${order.id}-v1`,
          args: [request(order.id)],
        });
        const { state } = await stopped(handle);
        expect(state.parked).toMatchObject({ failedStep: 'completion_gate', verdict: 'auto-retry is safe' });
        expect(state.steps.find((s) => s.name === 'completion_gate')?.error).toMatchObject({ code: 'BUDGET_EXCEEDED' });
        await handle.executeUpdate(decisionUpdate, {
          args: [{ decision: 'retry-step', by: 'ops', reason: 'budget reviewed' }],
        });
        return handle.result();
      },
      { policy: tight },
    );
    expect(result.status).toBe('completed');
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  });

  test('approved by a second person, a decision is applied; decisions also work from the temporal CLI', async () => {
    const { handle, order } = await parkedAtGate();
    // As operators run it: through the codec server, so the decision and its note are sent encrypted.
    const cli = (...args: string[]) =>
      execFileAsync(
        findTool('temporal'),
        [...args, '--address', h.env.address, '--namespace', h.namespace, '--codec-endpoint', h.codecUrl],
        { encoding: 'utf8' },
      );
    await cli(
      'workflow',
      'update',
      'execute',
      '--workflow-id',
      handle.workflowId,
      '--name',
      'decide',
      '--update-id',
      'abandon-1',
      '--input',
      JSON.stringify({ decision: 'abandon', by: 'ops', reason: 'the customer was refunded by hand' }),
    );
    // The shipped policy lets one operator abandon; the run ends at once.
    const result = await handle.result();
    expect(result).toMatchObject({
      status: 'abandoned',
      reason: 'abandoned by ops: the customer was refunded by hand',
    });
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    await h.recordHistory(handle.workflowId, 'refund-abandoned');
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    await clearFaults();
  });
});

describe('retry-step on create_refund', () => {
  test('after a lost answer inside the key window, it looks the refund up first and sends nothing', async () => {
    const order = await h.seedOrder(newOrderId());
    const createKey = `${opId(order.id)}:create_refund`;
    await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: createKey } });
    // The provider cannot be read: the run parks with its refund unknown.
    await h.failProviderReads(order.paymentIntentId);
    await h.withWorker(
      {},
      async (taskQueue) => {
        const handle = await h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${order.id}-v1`,
          args: [request(order.id)],
        });
        const { state } = await stopped(handle);
        expect(state).toMatchObject({
          status: 'needs_attention',
          effect: { status: 'unknown' },
          parked: { failedStep: 'create_refund' },
        });
        await clearFaults();
        const seen = Math.max(...(await h.requests({ paymentIntent: order.paymentIntentId })).map((r) => r.seq));
        const lookups = state.reconciliation.lookups;

        await handle.executeUpdate(decisionUpdate, {
          args: [{ decision: 'retry-step', step: 'create_refund', by: 'ops', reason: 'Stripe reads are back' }],
        });
        await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'checked' }] });
        completed(await handle.result());

        const after = (await h.requests({ paymentIntent: order.paymentIntentId })).filter((r) => r.seq > seen);
        expect(after[0]).toMatchObject({ method: 'GET', path: '/v1/refunds' });
        expect(after.filter((r) => r.method === 'POST')).toEqual([]);
        const done = await handle.query(stepsQuery);
        expect(done.reconciliation).toMatchObject({ lookups: lookups + 1, lastResult: 'completed' });
      },
      { policy: fewLookups(2) },
    );
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    expect((await h.requests({ idempotencyKey: createKey })).filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  test('a refund that never reached the provider is looked up, then sent once with the same key', async () => {
    const order = await h.seedOrder(newOrderId());
    const createKey = `${opId(order.id)}:create_refund`;
    await h.stripeFault({ kind: 'fail_before_commit', match: { idempotencyKey: createKey }, count: 1000 });
    await h.failProviderReads(order.paymentIntentId);
    await h.withWorker(
      {},
      async (taskQueue) => {
        const handle = await h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${order.id}-v1`,
          args: [request(order.id)],
        });
        const { state } = await stopped(handle);
        expect(state).toMatchObject({ status: 'needs_attention', parked: { failedStep: 'create_refund' } });
        await clearFaults();
        const seen = Math.max(...(await h.requests({ paymentIntent: order.paymentIntentId })).map((r) => r.seq));

        await handle.executeUpdate(decisionUpdate, {
          args: [{ decision: 'retry-step', step: 'create_refund', by: 'ops', reason: 'Stripe is back' }],
        });
        await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'checked' }] });
        completed(await handle.result());
        const after = (await h.requests({ paymentIntent: order.paymentIntentId })).filter((r) => r.seq > seen);
        expect(after.slice(0, 2)).toMatchObject([
          { method: 'GET', path: '/v1/refunds' },
          { method: 'POST', path: '/v1/refunds', idempotencyKey: createKey, status: 200 },
        ]);
      },
      { policy: fewLookups(2) },
    );
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  });
});

describe('compensations', () => {
  test('a compensation whose outcome is unknown is quarantined, never retried blind; approved, it is resent with the same Message-ID', async () => {
    const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
    const correction = messageIdForKey(`${opId(order.id)}:notify_customer:compensate`);
    // The correction email is stored and its 250 never sent: the run cannot tell whether the customer has it.
    await h.mailFault({ kind: 'drop_after_accept', match: { messageId: correction } });
    const { handle } = await startRefund(h.env.client, request(order.id));
    const { status, state } = await stopped(handle);

    expect(status).toBe('needs_attention');
    expect(state.outcome).toMatchObject({
      quarantined: true,
      reason: expect.stringMatching(/notify_customer's compensation is unknown: it is quarantined/),
    });
    expect(state.steps.find((s) => s.name === 'notify_customer')?.compensation).toMatchObject({
      status: 'unknown',
      error: { code: 'UNKNOWN_OUTCOME' },
    });
    expect(state.steps.find((s) => s.name === 'update_order')?.compensation).toMatchObject({ status: 'completed' });
    expect(state.parked).toMatchObject({
      verdict: 'stop and hand to a person',
      nextAction: expect.stringMatching(/compensation's outcome is unknown/),
      approvedBy: ['lead'],
    });
    expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 0 });
    // Nothing is sent again while it waits.
    await new Promise((r) => setTimeout(r, 1500));
    expect(await h.messages({ messageId: correction })).toHaveLength(1);

    // A person checks, proposes to resend, a second approves: resent once, same Message-ID.
    await expect(
      handle.executeUpdate(decisionUpdate, {
        args: [{ decision: 'compensate', by: 'ops', reason: 'not in the mailbox log' }],
      }),
    ).resolves.toMatchObject({ outcome: 'awaiting_approval' });
    // Still parked, and still among the runs that need a person: now for a second person's approval.
    expect((await handle.query(stepsQuery)).status).toBe('awaiting_approval');
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundStatus: ['awaiting_approval'],
      RefundNeedsAttention: [true],
    });
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'ok to resend' }] });
    await expect(handle.result()).resolves.toMatchObject({ status: 'compensated' });
    expect(await h.messages({ messageId: correction })).toHaveLength(2);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  });

  test('cancelling a run while it compensates finishes its compensations', async () => {
    const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
    // The correction email is refused once, slowly: the run is compensating when it is cancelled.
    const correction = messageIdForKey(`${opId(order.id)}:notify_customer:compensate`);
    await h.mailFault({
      kind: 'reply',
      stage: 'data',
      code: 451,
      message: '4.3.0 try again',
      delayMs: 1500,
      match: { messageId: correction },
    });
    const handle = await h.env.client.workflow.start(refundWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: `refund-${order.id}-v1`,
      args: [request(order.id)],
    });
    for (let i = 0; i < 200 && (await handle.query(stepsQuery)).status !== 'compensating'; i++)
      await new Promise((r) => setTimeout(r, 50));
    await handle.cancel();
    // Compensations are not cut short: the run finishes them and completes with that outcome.
    await expect(handle.result()).resolves.toMatchObject({ status: 'compensated' });
    // The cancellation came while the correction was being refused (slowly), and it was sent all the same.
    const correctionStep = (await handle.query(stepsQuery)).steps.find((s) => s.name === 'notify_customer');
    expect(correctionStep?.compensation?.attempts).toBe(2);

    expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 0, status: 'paid' });
    expect(await h.messages({ messageId: correction })).toHaveLength(1);
    const state = await handle.query(stepsQuery);
    expect(state.steps.find((s) => s.name === 'update_order')?.compensation).toMatchObject({ status: 'completed' });
    expect(state.steps.find((s) => s.name === 'notify_customer')?.compensation).toMatchObject({ status: 'completed' });
    // Every compensation completed: nothing is left for a person.
    expect(state.status).toBe('compensated');
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundStatus: ['compensated'],
      RefundNeedsAttention: [false],
    });
    await expect(inspectRun(h.env.client, h.sources, 'test', handle.workflowId)).resolves.toMatchObject({
      execution: 'COMPLETED',
      verdict: 'compensate, then resume',
    });
  });
});

test('temporal workflow reset to before create_refund of a completed run repeats no effect', async () => {
  const order = await h.seedOrder(newOrderId());
  const { handle } = await startRefund(h.env.client, request(order.id));
  const first = completed(await handle.result());
  const firstRun = (await handle.describe()).runId;
  const events = (await handle.fetchHistory()).events ?? [];
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createRefund');
  const resetTo = Number(scheduled!.activityTaskScheduledEventAttributes!.workflowTaskCompletedEventId);

  const cli = (...args: string[]) =>
    execFileAsync(findTool('temporal'), [...args, '--address', h.env.address, '--namespace', h.namespace], {
      encoding: 'utf8',
    });
  await cli(
    'workflow',
    'reset',
    '--workflow-id',
    handle.workflowId,
    '--event-id',
    String(resetTo),
    '--reason',
    'replay the refund from its create step',
  );
  const latest = h.env.client.workflow.getHandle(handle.workflowId);
  for (let i = 0; i < 50 && (await latest.describe()).runId === firstRun; i++)
    await new Promise((r) => setTimeout(r, 100));
  expect((await latest.describe()).runId).not.toBe(firstRun);
  const again = await latest.result();

  // The reset run executed create_refund and everything after it again: each replayed its receipt.
  expect(again).toMatchObject({
    status: 'completed',
    refund: { refundId: first.refund.refundId, replayed: true },
    order: { changed: false },
    notification: { alreadySent: true },
  });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
  expect(await h.store.getOrder(order.id)).toMatchObject({ refundedAmount: 1250, version: 2 });
});

describe('a notice whose hand-over is unknown', () => {
  test('with a message log, a lost answer settles without a person: the run completes, one message, reconciled', async () => {
    const order = await h.seedOrder(newOrderId());
    const noticeKey = `${opId(order.id)}:notify_customer`;
    const notice = messageIdForKey(noticeKey);
    await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
    const { result, state } = await h.withWorker(
      {},
      async (taskQueue) => {
        const handle = await h.env.client.workflow.start(refundWorkflow, {
          taskQueue,
          workflowId: `refund-${order.id}-v1`,
          args: [request(order.id)],
        });
        return { result: await handle.result(), state: await handle.query(stepsQuery) };
      },
      { messageLog: true },
    );
    expect(result).toMatchObject({ status: 'completed', notification: { messageId: notice } });
    expect(await h.messages({ messageId: notice })).toHaveLength(1);
    expect(await h.store.getNotification(noticeKey)).toMatchObject({
      status: 'sent',
      providerResponse: expect.stringMatching(/^reconciled: the message log has it as \d+/),
    });
    expect(state.steps.find((s) => s.name === 'notify_customer')?.ledger.map((a) => a.reason)).toEqual([
      'awaiting_message_log',
      null,
    ]);
  });

  test('a person who finds it delivered confirms it: the run completes, one message, and the audit trail names who confirmed', async () => {
    const order = await h.seedOrder(newOrderId());
    const noticeKey = `${opId(order.id)}:notify_customer`;
    const notice = messageIdForKey(noticeKey);
    // The notice is stored and its 250 never sent: the run cannot tell whether the customer has it.
    await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
    const { handle } = await startRefund(h.env.client, request(order.id));
    const { status, state } = await stopped(handle);
    expect(status).toBe('needs_attention');
    expect(state.parked).toMatchObject({
      failedStep: 'notify_customer',
      verdict: 'stop and hand to a person',
      nextAction: expect.stringMatching(
        new RegExp(`look for ${notice.replace(/[.<>]/g, '\\$&')} in the mailbox: if it is there, confirm-delivered`),
      ),
    });

    const evidence = `found ${notice} in the mail provider's delivery log, ticket 4711`;
    const record = await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'confirm-delivered', by: 'ops', reason: evidence }],
    });
    expect(record).toMatchObject({ decision: 'confirm-delivered', by: 'ops', outcome: 'applied' });
    await expect(handle.result()).resolves.toMatchObject({ status: 'completed', notification: { messageId: notice } });

    expect(await h.messages({ messageId: notice })).toHaveLength(1);
    expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
    const after = await handle.query(stepsQuery);
    expect(after.steps.find((s) => s.name === 'notify_customer')).toMatchObject({
      status: 'completed',
      note: expect.stringMatching(/^delivered, as ops confirmed: found/),
    });
    const gate = after.steps.find((s) => s.name === 'completion_gate')?.output as {
      findings: { check: string; ok: boolean; observed: string }[];
    };
    expect(gate.findings.find((f) => f.check === 'notification_state')).toMatchObject({
      ok: true,
      observed: expect.stringMatching(/is sent: delivery confirmed by ops/),
    });
    // The outbox says who confirmed it, where the mail server's answer would be.
    expect(await h.store.getNotification(noticeKey)).toMatchObject({
      status: 'sent',
      providerResponse: expect.stringMatching(/^delivery confirmed by ops: found/),
    });
    const trail = await h.store.operations.auditTrail(opId(order.id));
    expect(trail).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          event: 'decision',
          detail: expect.objectContaining({ decision: 'confirm-delivered', by: 'ops' }),
        }),
        expect.objectContaining({
          event: 'notification_sent',
          detail: expect.objectContaining({ key: noticeKey, confirmedBy: 'ops', reason: evidence }),
        }),
        expect.objectContaining({ event: 'completion_gate_passed' }),
      ]),
    );
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundStatus: ['completed'],
      RefundNeedsAttention: [false],
    });
  });

  test('a confirmation whose own write did nothing leaves the hand-over unknown: confirm-delivered is taken again, and completes the run', async () => {
    const order = await h.seedOrder(newOrderId());
    const noticeKey = `${opId(order.id)}:notify_customer`;
    const notice = messageIdForKey(noticeKey);
    await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
    // The store refuses the first confirmation's write outright: nothing was recorded.
    let calls = 0;
    const refusedOnce = async (input: Parameters<Harness['activities']['confirmNoticeDelivered']>[0]) => {
      if (calls++ > 0) return h.activities.confirmNoticeDelivered(input);
      throw ApplicationFailure.create({
        type: 'PERMISSION_DENIED',
        message: 'store credentials revoked',
        nonRetryable: true,
        details: [{ code: 'PERMISSION_DENIED', certainty: 'not_executed', reason: 'injected', ledger: [] }],
      });
    };
    await h.withWorker({ confirmNoticeDelivered: refusedOnce }, async (taskQueue) => {
      const handle = await h.env.client.workflow.start(refundWorkflow, {
        taskQueue,
        workflowId: `refund-${order.id}-v1`,
        args: [request(order.id)],
      });
      // A run left parked by a failed expectation would hold the worker's shutdown.
      try {
        await confirmedTwice(handle);
      } finally {
        await handle.terminate('test over').catch(() => undefined);
      }
    });
    // The refused one, then the second decision's (which may wait out the hand-over's deadline first).
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(await h.messages({ messageId: notice })).toHaveLength(1);
  });

  async function confirmedTwice(handle: WorkflowHandle<typeof refundWorkflow>): Promise<void> {
    await stopped(handle);
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'confirm-delivered', by: 'ops', reason: 'in the delivery log' }],
    });
    const { state } = await stopped(handle);
    // The hand-over is as unknown as before: its error stays the step's, and the verdict still offers both ways out.
    expect(state.steps.find((s) => s.name === 'notify_customer')?.error).toMatchObject({
      code: 'UNKNOWN_OUTCOME',
      certainty: 'may_have_executed',
    });
    expect(state.parked).toMatchObject({
      failedStep: 'notify_customer',
      nextAction: expect.stringMatching(/confirm-delivered .*; if not, retry-step notify_customer/),
    });
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'confirm-delivered', by: 'ops', reason: 'in the delivery log, again' }],
    });
    await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
  }
});

test('a retry-step at the completion gate sends no notice again: only a retry of the notice resends one whose hand-over is unknown', async () => {
  // Found by a review of the harness's loop (the body run again after a decision): it ran the notice again here
  // (resending it, while the retry-step was approved for the gate), where 1.0 ran the gate alone.
  const order = await h.seedOrder(newOrderId());
  const notice = messageIdForKey(`${opId(order.id)}:notify_customer`);
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
  const { handle } = await startRefund(h.env.client, request(order.id));
  const first = await stopped(handle);
  expect(first.state.parked?.failedStep).toBe('notify_customer');
  // The provider's word that the refund failed: the gate asks, finds the notice's hand-over still open, and parks.
  const refundId = first.state.effect.refundId!;
  await handle.signal(providerEventSignal, {
    id: `evt_${randomUUID().slice(0, 8)}`,
    type: 'refund.failed',
    refundId,
    refundStatus: 'failed',
    created: 1_700_000_000,
    receivedAt: new Date().toISOString(),
  });
  const parkedAt = async (step: string, after = 0) => {
    for (let i = 0; i < 100; i++) {
      const s = await handle.query(stepsQuery);
      if (s.status === 'needs_attention' && s.parked?.failedStep === step && Date.parse(s.parked.since) > after)
        return s;
      await new Promise((r) => setTimeout(r, 200));
    }
    const s = await handle.query(stepsQuery);
    throw new Error(`the run did not park at ${step}: ${s.status} at ${s.parked?.failedStep}: ${s.outcome?.reason}`);
  };
  await parkedAt('completion_gate');
  const decided = await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'look again' }],
  });
  await parkedAt('completion_gate', Date.parse(decided.at));
  expect(await h.messages({ messageId: notice })).toHaveLength(1);
  await handle.terminate();
});
