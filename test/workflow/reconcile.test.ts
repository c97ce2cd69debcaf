// A refund whose outcome is unknown, with stubbed activities: the run asks the provider (never a
// blind resend) and goes on from what it learns: the refund exists, it was never made, it is
// partial or failed, or nobody can tell yet. The lost answers at a real server are the stack's
// (test/integration/walkthrough*.test.ts, network-faults, worker-kills).
import { decisionUpdate, stepsQuery } from '../../src/contract';
import { completed, fewLookups, stopped } from '../helpers/runs';
import { callNames, failure, type Override, type World } from './fake-activities';
import { startWorkflowTier, type WorkflowTier } from './tier';

let t: WorkflowTier;
beforeAll(async () => {
  t = await startWorkflowTier();
});
afterAll(async () => {
  await t?.close();
});

const unknown = () => failure('UNKNOWN_OUTCOME', 'may_have_executed', 'timeout');
/** The create reaches the provider, which makes the refund; its answer is lost. */
const madeAnswerLost: Override = async (_, next) => {
  await next();
  throw unknown();
};
/** The create is lost before the provider saw it. */
const neverArrived: Override = async () => Promise.reject(unknown());
const twoLookups = (w: World) => (w.settings.policy = fewLookups(2));
const keysSent = (world: World) =>
  world.calls
    .filter((c) => c.name === 'createRefund')
    .map((c) => (c.input as { idempotencyKey: string }).idempotencyKey);

/** A lookup's answer as the reconcile activity gives it. */
function lookup(world: World, result: string, refund: World['refunds'][number] | null = null) {
  const at = new Date().toISOString();
  const ledger = [
    {
      attempt: 1,
      startedAt: at,
      finishedAt: at,
      outcome: 'ok',
      certainty: null,
      reason: null,
      transportRequests: 1,
      retryAfterMs: null,
      nextDelayMs: null,
      providerRequestId: null,
    },
  ];
  return {
    result,
    refund: refund && { ...refund, replayed: false },
    method: 'list',
    scanned: world.refunds.length,
    matches: refund ? 1 : 0,
    insideDedupeWindow: false,
    conclusiveAt: null,
    requestsSent: 1,
    note: `scripted: ${result}`,
    evidence: { attempt: 1, ledger },
  };
}

test('found at the provider: the receipt comes from reconciliation, nothing is sent again, and the run completes', async () => {
  const { world, handle } = await t.start({ over: { createRefund: madeAnswerLost } });
  const result = completed(await handle.result());
  expect(keysSent(world)).toHaveLength(1);
  expect(world.refunds).toHaveLength(1);
  expect(result.refund.refundId).toBe(world.refunds[0]!.refundId);
  const state = await handle.query(stepsQuery);
  expect(state.steps[1]).toMatchObject({
    status: 'completed',
    note: expect.stringMatching(/^receipt from reconciliation/),
  });
  expect(state.reconciliation).toMatchObject({ lookups: 1, lastResult: 'completed', resubmissions: 0 });
  expect(callNames(world, ['createRefund', 'reconcileRefund', 'applyRefund'])).toEqual([
    'createRefund',
    'reconcileRefund',
    'applyRefund',
  ]);
});

test('proven never made: resent once with the same key, and the run completes with one refund', async () => {
  let lost = true;
  const { world, handle } = await t.start({
    over: { createRefund: (i, next) => (lost ? ((lost = false), neverArrived(i, next)) : next()) },
  });
  completed(await handle.result());
  expect(callNames(world, ['createRefund', 'reconcileRefund'])).toEqual([
    'createRefund',
    'reconcileRefund',
    'createRefund',
  ]);
  expect(new Set(keysSent(world)).size).toBe(1);
  expect(world.refunds).toHaveLength(1);
  expect((await handle.query(stepsQuery)).reconciliation).toMatchObject({
    lastResult: 'not_started_confirmed',
    resubmissions: 1,
  });
});

test("still unknown after the policy's lookups: it parks with the effect unknown, sends nothing; a reconcile decision that finds it goes on from the order update", async () => {
  let answers = false;
  const { world, handle } = await t.start({
    world: twoLookups,
    over: {
      createRefund: madeAnswerLost,
      reconcileRefund: async (_, next) => (answers ? next() : lookup(world, 'unknown')),
    },
  });
  const { status, state } = await stopped(handle);
  expect(status).toBe('needs_attention');
  expect(state.effect).toMatchObject({ status: 'unknown' });
  expect(state.parked).toMatchObject({ failedStep: 'create_refund' });
  expect(state.outcome?.reason).toMatch(
    /the refund's outcome is unknown: still unknown after 2 lookups.*Nothing more is sent/,
  );
  expect(state.reconciliation.lookups).toBe(2);
  expect((await handle.describe()).searchAttributes).toMatchObject({
    RefundEffect: ['unknown'],
    RefundStep: ['create_refund'],
    RefundNeedsAttention: [true],
  });

  answers = true;
  // Only a lookup: anyone may ask for it (the scheduled sweep does).
  await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'reconcile', by: 'ops', reason: 'look again' }] });
  completed(await handle.result());
  expect(keysSent(world)).toHaveLength(1);
  expect(callNames(world, ['applyRefund', 'sendRefundNotice'])).toEqual(['applyRefund', 'sendRefundNotice']);
});

test('found failed at the provider: nothing refunded, nobody emailed, and a person decides', async () => {
  const { world, handle } = await t.start({
    over: {
      createRefund: madeAnswerLost,
      reconcileRefund: async () => {
        world.refunds[0]!.status = 'failed';
        return lookup(world, 'failed', world.refunds[0]!);
      },
    },
  });
  const { status, state } = await stopped(handle);
  expect(status).toBe('needs_attention');
  expect(state.effect).toMatchObject({ status: 'failed', certainty: 'completed' });
  expect(state.outcome?.reason).toMatch(
    /the provider failed refund .*Nothing was refunded and the customer was not emailed/,
  );
  expect(callNames(world, ['applyRefund', 'sendRefundNotice'])).toEqual([]);
});

test('found partial: the order is repaired forward to what was refunded, the email is frozen, and a person decides', async () => {
  const { world, handle } = await t.start({
    over: {
      createRefund: madeAnswerLost,
      reconcileRefund: async () => {
        world.refunds[0]!.amount = 1000;
        return lookup(world, 'partial', world.refunds[0]!);
      },
    },
  });
  const { status, state } = await stopped(handle);
  expect(status).toBe('needs_attention');
  expect(state.effect).toMatchObject({ status: 'partial' });
  expect(world.orderUpdate).toMatchObject({ amount: 1000 });
  expect(state.steps.find((s) => s.name === 'notify_customer')).toMatchObject({
    status: 'skipped',
    note: expect.stringMatching(/^frozen: the refund is partial/),
  });
  expect(state.outcome?.reason).toMatch(/^partial refund: .*the customer was not emailed/);
  expect(callNames(world, ['sendRefundNotice'])).toEqual([]);
});

test('an answer lost again and again is resent at most three times, then a person decides', async () => {
  const { world, handle } = await t.start({ over: { createRefund: neverArrived } });
  const { status, state } = await stopped(handle);
  expect(status).toBe('needs_attention');
  expect(state.outcome?.reason).toMatch(/stayed unknown through 3 resubmissions/);
  expect(keysSent(world)).toHaveLength(4);
  expect(new Set(keysSent(world)).size).toBe(1);
});
