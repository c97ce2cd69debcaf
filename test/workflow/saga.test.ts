// The refund saga's decisions with stubbed activities: a completed run, refusals, and each class of
// failure the recovery policy maps (retried, rejected, quarantined, repaired forward, compensated).
// What the providers and the store really do is the stack tier's (test/integration).
import { TEST_POLICY, completed, stopped } from '../helpers/runs';
import { stepsQuery } from '../../src/contract';
import { callNames, failure, type In, type World } from './fake-activities';
import { startWorkflowTier, type WorkflowTier } from './tier';

let t: WorkflowTier;
beforeAll(async () => {
  t = await startWorkflowTier();
});
afterAll(async () => {
  await t?.close();
});

test('a refund runs every step once, in order, with keys derived from the operation', async () => {
  const { world, handle } = await t.start();
  const result = completed(await handle.result());
  const op = `refund:test:${world.order.id}:v1`;

  expect(callNames(world).filter((n) => n !== 'recordOutcome')).toEqual([
    'beginOperation',
    'createRefund',
    'applyRefund',
    'sendRefundNotice',
    'checkCompletion',
  ]);
  expect(result).toMatchObject({
    operationId: op,
    refund: { refundId: world.refunds[0]!.refundId },
    order: { refundedAmount: 1250, changed: true },
  });
  const state = await handle.query(stepsQuery);
  expect(state.status).toBe('completed');
  expect(state.steps.map((s) => [s.name, s.status, s.attempts])).toEqual([
    ['load_order', 'completed', 1],
    ['create_refund', 'completed', 1],
    ['update_order', 'completed', 1],
    ['notify_customer', 'completed', 1],
    ['completion_gate', 'completed', 1],
  ]);
  expect(state.steps.map((s) => s.transportRequests)).toEqual([0, 1, 0, 1, 2]);
  expect(state.steps.map((s) => s.idempotencyKey)).toEqual([
    undefined,
    `${op}:create_refund`,
    `${op}:update_order`,
    `${op}:notify_customer`,
    undefined,
  ]);
  expect(world.calls.find((c) => c.name === 'createRefund')?.input).toMatchObject({
    amount: 1250,
    currency: 'usd',
    idempotencyKey: `${op}:create_refund`,
  });
  expect(state.effect).toEqual({ status: 'refunded', certainty: 'completed', refundId: result.refund.refundId });
  expect(state.budget).toMatchObject({ providerCallsUsed: 4, retryTimeUsedMs: 0 });
  expect(state.operation).toMatchObject({
    operationId: op,
    recordedByThisRun: true,
    policyVersion: TEST_POLICY.version,
  });
  const described = await handle.describe();
  expect(described.searchAttributes).toMatchObject({
    RefundOrderId: [world.order.id],
    RefundStatus: ['completed'],
    RefundStep: ['completion_gate'],
  });
});

describe("the gate's first look, made by the notice's activity", () => {
  const run = async (readsFirst: World['readsFirst']) => {
    const { world, handle } = await t.start({ world: (w) => (w.readsFirst = readsFirst) });
    completed(await handle.result());
    return { world, state: await handle.query(stepsQuery) };
  };

  test('is the gate step, recorded and charged as its own task would be, and no task of its own', async () => {
    const { world, state } = await run('fits');
    expect(callNames(world, ['sendRefundNotice', 'checkCompletion'])).toEqual(['sendRefundNotice']);
    const asked = world.calls.find((c) => c.name === 'sendRefundNotice')!.input as In<'sendRefundNotice'>;
    expect(asked.read).toEqual({
      step: 'completion_gate',
      input: expect.objectContaining({ refundId: world.refunds[0]!.refundId, amount: 1250 }),
      startToCloseMs: TEST_POLICY.timeouts.stripe.startToCloseMs,
    });
    const gate = state.steps.find((s) => s.name === 'completion_gate')!;
    expect(gate).toMatchObject({ status: 'completed', attempts: 1, transportRequests: 2 });
    expect(gate.output).toMatchObject({ verdict: 'pass' });
    expect(state.budget).toMatchObject({ providerCallsUsed: 4 });
  });

  test.each(['unusable', 'failed'] as const)(
    'that comes back %s is paid for, and the gate task looks again',
    async (how) => {
      const { world, state } = await run(how);
      expect(callNames(world, ['sendRefundNotice', 'checkCompletion'])).toEqual([
        'sendRefundNotice',
        'checkCompletion',
      ]);
      const gate = state.steps.find((s) => s.name === 'completion_gate')!;
      expect(gate).toMatchObject({ status: 'completed', attempts: 2, transportRequests: 4 });
      // The create, the notice, the look's two and the task's two.
      expect(state.budget).toMatchObject({ providerCallsUsed: 6 });
      const task = world.calls.filter((c) => c.name === 'checkCompletion');
      expect(task).toHaveLength(1);
    },
  );
});

test('input the schema refuses is rejected as a result, before any activity, and findable as rejected', async () => {
  const { world, handle } = await t.start({ input: { orderId: 'ord_bad', amount: 'lots' } });
  expect(await handle.result()).toMatchObject({
    status: 'rejected',
    orderId: 'ord_bad',
    operationId: null,
    failedStep: null,
    reason: expect.stringMatching(/amount.*currency/),
  });
  expect(world.calls).toEqual([]);
  expect((await handle.describe()).status.name).toBe('COMPLETED');
  expect((await handle.describe()).searchAttributes).toMatchObject({
    RefundStatus: ['rejected'],
    RefundStep: ['validate'],
    RefundOrderId: ['ord_bad'],
  });
});

test('an unknown order is rejected at load_order and nothing else runs', async () => {
  const { world, handle } = await t.start({ world: (w) => (w.order.id = 'ord_other') });
  const { status, state } = await stopped(handle);
  expect(status).toBe('rejected');
  expect(state.outcome).toMatchObject({ status: 'rejected', failedStep: 'load_order' });
  expect(state.steps[0]!.error).toMatchObject({
    code: 'PERMANENT_BUSINESS',
    reason: 'order_not_found',
    certainty: 'not_executed',
  });
  expect(state.steps.slice(1).every((s) => s.status === 'pending')).toBe(true);
  expect(callNames(world, ['createRefund', 'applyRefund', 'sendRefundNotice'])).toEqual([]);
});

test('more than is refundable is rejected in the workflow and never reaches the provider', async () => {
  const { world, handle } = await t.start({ amount: 5001 });
  const { status, state } = await stopped(handle);
  expect(status).toBe('rejected');
  expect(state.outcome?.reason).toMatch(/exceeds the 5000 still refundable/);
  expect(state.steps[0]!.error).toMatchObject({ code: 'PERMANENT_BUSINESS', reason: 'refund_not_possible' });
  expect(callNames(world, ['createRefund'])).toEqual([]);
});

describe('failures, as the recovery policy decides them', () => {
  test("a transient failure is retried by the activity's retry policy: one more attempt with the same key, then the run goes on", async () => {
    let failed = false;
    const once = (_: never, next: () => Promise<unknown>) => {
      if (failed) return next();
      failed = true;
      return Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'connection_reset', { retryable: true }));
    };
    const { world, handle } = await t.start({ over: { createRefund: once } });
    completed(await handle.result());
    const creates = world.calls
      .filter((c) => c.name === 'createRefund')
      .map((c) => (c.input as { idempotencyKey: string }).idempotencyKey);
    expect(creates).toHaveLength(2);
    expect(new Set(creates).size).toBe(1);
    expect(world.refunds).toHaveLength(1);
    expect((await handle.query(stepsQuery)).steps[1]).toMatchObject({ status: 'completed', attempts: 2 });
  });

  test('a provider refusal is rejected: nothing was refunded', async () => {
    const { handle } = await t.start({
      over: {
        createRefund: async () =>
          Promise.reject(failure('PERMANENT_BUSINESS', 'not_executed', 'charge_already_refunded')),
      },
    });
    const { status, state } = await stopped(handle);
    expect(status).toBe('rejected');
    expect(state.outcome).toMatchObject({ status: 'rejected', failedStep: 'create_refund' });
    expect(state.outcome?.reason).toMatch(/Nothing was refunded/);
    expect(state.effect.status).toBe('none');
  });

  test('a create_refund failure of undeterminable effect is quarantined as unknown, never reported as "nothing refunded"', async () => {
    const { handle } = await t.start({
      over: {
        createRefund: async () => Promise.reject(failure('POISON', 'undeterminable', 'the answer could not be read')),
      },
    });
    const { status, state } = await stopped(handle);
    expect(status).toBe('needs_attention');
    expect(state.outcome).toMatchObject({ quarantined: true, failedStep: 'create_refund' });
    expect(state.effect).toMatchObject({ status: 'unknown', certainty: 'undeterminable' });
    expect(state.recovery).toMatchObject({ action: 'quarantine', owner: 'operator' });
    expect(state.outcome?.reason).toMatch(
      /Whether it took effect is unknown: reconcile operation refund:test:.*:v1 with the provider/,
    );
    expect(state.outcome?.reason).not.toMatch(/Nothing was refunded/);
  });

  test('a permanently rejected notification leaves the refund standing and asks for forward repair, nothing undone', async () => {
    const { world, handle } = await t.start({
      over: {
        sendRefundNotice: async () =>
          Promise.reject(failure('PERMANENT_BUSINESS', 'not_executed', 'recipient_rejected')),
      },
    });
    const { status, state } = await stopped(handle);
    expect(status).toBe('needs_attention');
    expect(state.lastFailure).toMatchObject({
      step: 'notify_customer',
      code: 'PERMANENT_BUSINESS',
      reason: 'recipient_rejected',
    });
    expect(state.recovery).toMatchObject({ action: 'stop' });
    expect(state.outcome?.reason).toMatch(/stands and is never sent again/);
    expect(state.steps.every((s) => s.compensation === undefined)).toBe(true);
    expect(callNames(world, ['revertRefund', 'sendRefundCorrection'])).toEqual([]);
  });

  test('an unverifiable refund (the gate may not read the provider) is left standing, not compensated', async () => {
    const { world, handle } = await t.start({
      over: {
        checkCompletion: async () => Promise.reject(failure('PERMISSION_DENIED', 'not_executed', 'key revoked')),
      },
    });
    const { status, state } = await stopped(handle);
    expect(status).toBe('needs_attention');
    expect(state.outcome?.reason).toMatch(/stands and is never sent again; a person must finish completion_gate/);
    expect(state.steps.every((s) => s.compensation === undefined)).toBe(true);
    expect(world.orderUpdate?.revertedByKey).toBeNull();
  });

  test('an activity that returns nothing stops the run honestly (POISON, result_unusable) and the parking is audited', async () => {
    const { world, handle } = await t.start({ over: { applyRefund: async () => undefined } });
    const { status, state } = await stopped(handle);
    expect(status).toBe('needs_attention');
    expect(state.steps.find((s) => s.name === 'update_order')).toMatchObject({
      status: 'failed',
      error: { code: 'POISON', reason: 'result_unusable' },
    });
    expect(state.outcome?.reason).toMatch(/stands and is never sent again/);
    for (let i = 0; i < 100 && !world.audit.some((a) => a.event === 'run_parked'); i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(world.audit.find((a) => a.event === 'run_parked')).toMatchObject({ status: 'needs_attention' });
  });

  test('with one provider call left, the completion gate (two requests an attempt) is refused for its budget, not sent', async () => {
    const { world, handle } = await t.start({
      world: (w) => (w.settings.policy = { ...TEST_POLICY, budget: { ...TEST_POLICY.budget, providerCalls: 3 } }),
    });
    const { status, state } = await stopped(handle);
    expect(status).toBe('needs_attention');
    expect(state.outcome).toMatchObject({ failedStep: 'completion_gate' });
    expect(state.outcome?.reason).toMatch(/BUDGET_EXCEEDED .*too few left for one attempt of 2/);
    expect(state.budget.providerCallsUsed).toBeLessThanOrEqual(3);
    expect(callNames(world, ['checkCompletion'])).toEqual([]);
  });
});

test('a refund the provider fails after accepting it is compensated newest first, each under its own key', async () => {
  const { world, handle } = await t.start({ world: (w) => (w.settlesAs = 'failed') });
  const { status, state } = await stopped(handle);
  const op = `refund:test:${world.order.id}:v1`;

  expect(status).toBe('compensated');
  expect(state.outcome).toMatchObject({ status: 'compensated', failedStep: 'completion_gate' });
  expect(state.effect).toMatchObject({ status: 'failed', certainty: 'completed' });
  // Newest first: the correction goes out before the order is restored; the refund itself is repaired forward.
  expect(callNames(world, ['revertRefund', 'sendRefundCorrection'])).toEqual(['sendRefundCorrection', 'revertRefund']);
  const byName = Object.fromEntries(state.steps.map((s) => [s.name, s]));
  expect(byName.notify_customer!.compensation).toMatchObject({
    kind: 'compensation',
    status: 'completed',
    key: `${op}:notify_customer:compensate`,
  });
  expect(byName.update_order!.compensation).toMatchObject({
    kind: 'compensation',
    status: 'completed',
    key: `${op}:update_order:compensate`,
  });
  expect(byName.create_refund!.compensation).toMatchObject({ kind: 'forward_repair', status: 'not_compensable' });
  expect(world.orderUpdate?.revertedByKey).toBe(`${op}:update_order:compensate`);
  expect(world.correction?.key).toBe(`${op}:notify_customer:compensate`);
  expect(world.correction?.messageId).not.toBe(world.notice?.messageId);
  expect(world.refunds).toHaveLength(1);
});
