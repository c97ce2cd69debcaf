// Parked runs and the decisions that move them on, with stubbed activities: who may decide, what
// needs a second person, what each decision does next, and what is refused before it reaches
// history. Cases that count effects at the providers stay in test/integration/decisions.test.ts.
import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { newKeyPair, signDecision } from '../../src/cli/decider-keys';
import type { DecisionInput } from '../../src/contract';
import { decisionAddress, decisionUpdate, stepsQuery } from '../../src/contract';
import type { DecisionPolicy } from '../../src/reliability/policy';
import { decidersOf, verdict } from '../../src/reliability/verdict';
import type { refundWorkflow } from '../../src/workflows';
import { completed, stopped, TEST_POLICY } from '../helpers/runs';
import { callNames, failure, type Override, type World } from './fake-activities';
import { asInspected, startWorkflowTier, type WorkflowTier } from './tier';

let t: WorkflowTier;
beforeAll(async () => {
  t = await startWorkflowTier();
});
afterAll(async () => {
  await t?.close();
});

type Handle = WorkflowHandle<typeof refundWorkflow>;

/** The history's length once the parked run is idle: its parking audit done and its last workflow task completed. */
async function idleHistoryLength(handle: Handle): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const { raw } = await handle.describe();
    const events = (await handle.fetchHistory()).events ?? [];
    const last = events.at(-1)?.eventType;
    if (
      !raw.pendingActivities?.length &&
      !raw.pendingWorkflowTask &&
      last === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )
      return events.length;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${handle.workflowId} did not go idle`);
}
const historyLength = async (handle: Handle) => (await handle.fetchHistory()).events?.length ?? 0;

/** The provider cannot be read at the completion gate until `gate.up()`: the refund, the order and the email are done before it parks. */
function gateDown() {
  let down = true;
  const checkCompletion: Override = (_, next) =>
    down ? Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'server_error')) : next();
  return { over: { checkCompletion }, up: () => (down = false) };
}

async function parkedAtGate(world?: (w: World) => void) {
  const gate = gateDown();
  const started = await t.start({ over: gate.over, world });
  const { status, state } = await stopped(started.handle);
  expect(status).toBe('needs_attention');
  return { ...started, state, gate };
}

describe('a run that needs a person parks', () => {
  test('with its verdict and who may decide; retry-step repeats no earlier effect and completes it', async () => {
    const { world, handle, state, gate } = await parkedAtGate();
    expect(state.parked).toMatchObject({
      failedStep: 'completion_gate',
      verdict: 'auto-retry is safe',
      nextAction: expect.stringMatching(/^retry-step completion_gate/),
      decidedBy: expect.arrayContaining(['ops']),
    });
    // One verdict function: the run's is the function's over the facts its state shows, and so is inspect's.
    const { facts, deciders, ...own } = state.parked!;
    const drawn = verdict({ facts, deciders });
    expect(own).toMatchObject(drawn);
    expect(facts).toMatchObject({ failedStep: 'completion_gate', effect: { status: 'refunded' }, quarantined: false });
    expect(deciders).toEqual(decidersOf(world.settings.policy.decisions));
    expect(verdict(asInspected(state))).toEqual(drawn);
    expect(state.steps.slice(0, 4).map((s) => s.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
    const described = await handle.describe();
    expect(described.status.name).toBe('RUNNING');
    expect(described.searchAttributes).toMatchObject({
      RefundNeedsAttention: [true],
      RefundStatus: ['needs_attention'],
      RefundVerdict: ['auto-retry is safe'],
      RefundStep: ['completion_gate'],
    });

    gate.up();
    const decision = await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
      updateId: 'retry-1',
    });
    expect(decision).toMatchObject({ seq: 1, decision: 'retry-step', step: 'completion_gate', outcome: 'applied' });
    completed(await handle.result());
    expect(callNames(world, ['createRefund', 'applyRefund', 'sendRefundNotice'])).toEqual([
      'createRefund',
      'applyRefund',
      'sendRefundNotice',
    ]);
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
    expect(world.audit.map((a) => a.event)).toEqual(expect.arrayContaining(['run_parked', 'decision']));
  });

  // Moved from test/integration/decisions.test.ts: workflow logic only (the Update's idempotency).
  test('a decision sent twice under one update id is applied once', async () => {
    const { handle, gate } = await parkedAtGate();
    gate.up();
    const input = {
      args: [{ decision: 'retry-step' as const, by: 'ops', reason: 'once' }] as [DecisionInput],
      updateId: 'retry-once',
    };
    const [a, b] = await Promise.all([
      handle.executeUpdate(decisionUpdate, input),
      handle.executeUpdate(decisionUpdate, input),
    ]);
    expect(b).toEqual(a);
    await handle.result();
    expect((await handle.query(stepsQuery)).decisions).toHaveLength(1);
  });

  // Moved from test/integration/decisions.test.ts: the Update's validator, nothing at a server.
  test('an unauthorized decider and an ill-timed decision are refused before anything is written to history', async () => {
    const { handle, gate } = await parkedAtGate();
    const before = await idleHistoryLength(handle);
    const refused = (input: object) =>
      handle.executeUpdate(decisionUpdate, { args: [input as never] }).then(
        () => undefined,
        (e: unknown) => e,
      );

    const mallory = await refused({ decision: 'abandon', by: 'mallory', reason: 'why not' });
    expect(mallory).toBeInstanceOf(WorkflowUpdateFailedError);
    expect((mallory as WorkflowUpdateFailedError).cause?.message).toMatch(
      /mallory may not abandon: it takes the operator role, and mallory has none/,
    );
    const approveNothing = await refused({ decision: 'approve', by: 'lead', reason: 'ok' });
    expect((approveNothing as WorkflowUpdateFailedError).cause?.message).toMatch(/no decision waiting for approval/);
    const wrongStep = await refused({ decision: 'retry-step', step: 'create_refund', by: 'ops', reason: 'again' });
    expect((wrongStep as WorkflowUpdateFailedError).cause?.message).toMatch(
      /only the step that failed, completion_gate, can be retried/,
    );
    const notNeeded = await refused({ decision: 'compensate', by: 'ops', reason: 'undo' });
    expect((notNeeded as WorkflowUpdateFailedError).cause?.message).toMatch(
      /nothing to compensate: the refund is refunded/,
    );
    const noReason = await refused({ decision: 'abandon', by: 'ops', reason: ' ' });
    expect((noReason as WorkflowUpdateFailedError).cause?.message).toMatch(/reason: must say why/);
    expect(await historyLength(handle)).toBe(before);

    // Once a decision moved it on, the same decision no longer fits.
    gate.up();
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'retry-step', by: 'ops', reason: 'back' }] });
    await handle.result();
    // A finished run takes no Update at all.
    await expect(
      handle.executeUpdate(decisionUpdate, { args: [{ decision: 'abandon', by: 'ops', reason: 'late' }] }),
    ).rejects.toThrow();
  });

  // Moved from test/integration/decisions.test.ts: the decision policy comes from the decisionPolicy activity; nothing at a server.
  test("who may decide is the workers' configuration, also for a run parked before it loaded its settings", async () => {
    const onlyAlice = {
      ...TEST_POLICY,
      decisions: { ...TEST_POLICY.decisions, roles: { alice: ['operator' as const] } },
    };
    const denied: Override = async () => Promise.reject(failure('PERMISSION_DENIED', 'not_executed', 'injected'));
    const { handle } = await t.start({
      over: { beginOperation: denied },
      world: (w) => (w.settings.policy = onlyAlice),
    });
    const { state } = await stopped(handle);
    expect(state.parked).toMatchObject({ failedStep: 'load_order', decidedBy: ['alice'] });
    await expect(
      handle.executeUpdate(decisionUpdate, { args: [{ decision: 'abandon', by: 'ops', reason: 'shipped name' }] }),
    ).rejects.toMatchObject({
      cause: { message: expect.stringMatching(/ops may not abandon/) },
    });
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'abandon', by: 'alice', reason: 'store access is being fixed' }],
    });
    await expect(handle.result()).resolves.toMatchObject({ status: 'abandoned' });
  });

  // Moved from test/integration/decisions.test.ts: approvals and their expiry are workflow timers and state.
  test('a decision that needs approval waits for a second person; unapproved, it expires and the run stops', async () => {
    const quick = {
      ...TEST_POLICY,
      decisions: { ...TEST_POLICY.decisions, needApproval: ['abandon'], approvalTtlMs: 1500 },
    };
    const { handle } = await parkedAtGate((w) => (w.settings.policy = quick));
    const proposal = await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'abandon', by: 'ops', reason: 'handled by support' }],
    });
    expect(proposal).toMatchObject({ outcome: 'awaiting_approval', expiresAt: expect.any(String) });
    // The proposer cannot approve it.
    await expect(
      handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'ops', reason: 'me' }] }),
    ).rejects.toThrow(WorkflowUpdateFailedError);
    const result = await handle.result();
    await t.recordHistory(handle.workflowId, 'refund-approval-expired');
    const state = await handle.query(stepsQuery);
    const described = await handle.describe();
    expect(result).toMatchObject({
      status: 'stopped',
      reason: expect.stringMatching(/abandon proposed by ops was not approved before/),
    });
    // The refund stands and the gate never confirmed it: stopped, and still among the runs a person must look at.
    expect(described.searchAttributes).toMatchObject({
      RefundStatus: ['stopped'],
      RefundNeedsAttention: [true],
      RefundVerdict: ['stop and hand to a person'],
    });
    expect(state.decisions).toEqual([expect.objectContaining({ decision: 'abandon', outcome: 'expired' })]);
  });

  test('abandon ends the run as abandoned, naming who and why, and undoes nothing', async () => {
    const { world, handle } = await parkedAtGate();
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'abandon', by: 'ops', reason: 'the customer was refunded by hand' }],
    });
    await expect(handle.result()).resolves.toMatchObject({
      status: 'abandoned',
      reason: 'abandoned by ops: the customer was refunded by hand',
      failedStep: 'completion_gate',
    });
    expect(callNames(world, ['revertRefund', 'sendRefundCorrection'])).toEqual([]);
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundStatus: ['abandoned'],
      RefundNeedsAttention: [false],
    });
  });

  test('a parked run cancelled while it waits says what it leaves behind and stays among the runs that need a person', async () => {
    const { world, handle } = await parkedAtGate();
    await handle.cancel();
    await expect(handle.result()).rejects.toMatchObject({ cause: { name: 'CancelledFailure' } });
    const state = await handle.query(stepsQuery);
    expect(state.outcome?.reason).toMatch(
      /cancelled while needs_attention; the refund is refunded: a person finishes what was started/,
    );
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundNeedsAttention: [true],
      RefundVerdict: ['stop and hand to a person'],
      RefundEffect: ['refunded'],
    });
    expect(world.audit.at(-1)).toMatchObject({
      status: 'cancelled',
      reason: expect.stringMatching(/cancelled while needs_attention/),
    });
    expect(callNames(world, ['revertRefund', 'sendRefundCorrection'])).toEqual([]);
  });
});

describe('retry-step on create_refund (approved by a second person)', () => {
  const unknownCreate: Override = async () =>
    Promise.reject(failure('UNKNOWN_OUTCOME', 'may_have_executed', 'timeout'));

  test('after an unknown outcome, it looks the refund up first and, found, sends nothing', async () => {
    // The provider made the refund, the answer was lost, and no lookup could read it until the decision.
    let reads = false;
    const { world, handle } = await t.start({
      over: {
        createRefund: async (_, next) => {
          await next();
          throw failure('UNKNOWN_OUTCOME', 'may_have_executed', 'timeout');
        },
        reconcileRefund: async (_, next) =>
          reads ? next() : Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'server_error')),
      },
      world: (w) =>
        (w.settings.policy = {
          ...TEST_POLICY,
          rules: TEST_POLICY.rules.map((r) =>
            r.code === 'UNKNOWN_OUTCOME' && r.boundary === 'stripe' ? { ...r, maxAttempts: 2 } : r,
          ),
        }),
    });
    const { state } = await stopped(handle);
    expect(state).toMatchObject({
      status: 'needs_attention',
      effect: { status: 'unknown' },
      parked: { failedStep: 'create_refund' },
    });
    const lookups = state.reconciliation.lookups;
    reads = true;
    world.calls.length = 0;

    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', step: 'create_refund', by: 'ops', reason: 'Stripe reads are back' }],
    });
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'checked' }] });
    completed(await handle.result());
    const after = callNames(world, ['reconcileRefund', 'createRefund', 'applyRefund']);
    expect(after).toEqual(['reconcileRefund', 'applyRefund']);
    expect((await handle.query(stepsQuery)).reconciliation).toMatchObject({
      lookups: lookups + 1,
      lastResult: 'completed',
    });
    expect(world.refunds).toHaveLength(1);
  });

  test('a refund proven absent is then sent once, with the same key', async () => {
    let fail = true;
    const { world, handle } = await t.start({
      over: {
        createRefund: (i, next) => (fail ? unknownCreate(i, next) : next()),
        reconcileRefund: async (_, next) =>
          fail ? Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'server_error')) : next(),
      },
      world: (w) =>
        (w.settings.policy = {
          ...TEST_POLICY,
          rules: TEST_POLICY.rules.map((r) =>
            r.code === 'UNKNOWN_OUTCOME' && r.boundary === 'stripe' ? { ...r, maxAttempts: 2 } : r,
          ),
        }),
    });
    await stopped(handle);
    fail = false;
    world.calls.length = 0;
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', step: 'create_refund', by: 'ops', reason: 'Stripe is back' }],
    });
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'checked' }] });
    const result = completed(await handle.result());
    expect(callNames(world, ['reconcileRefund', 'createRefund'])).toEqual(['reconcileRefund', 'createRefund']);
    expect(world.calls.find((c) => c.name === 'createRefund')?.input).toMatchObject({
      idempotencyKey: `${result.operationId}:create_refund`,
    });
    expect(world.refunds).toHaveLength(1);
  });
});

describe('a notice whose hand-over is unknown', () => {
  const unknownNotice: Override = async () =>
    Promise.reject(failure('UNKNOWN_OUTCOME', 'may_have_executed', 'no_reply_after_data'));

  test("confirm-delivered records it as sent on a person's word: nothing is sent, the gate judges, the run completes", async () => {
    const { world, handle } = await t.start({ over: { sendRefundNotice: unknownNotice } });
    const { state } = await stopped(handle);
    expect(state.parked).toMatchObject({
      failedStep: 'notify_customer',
      verdict: 'stop and hand to a person',
      nextAction: expect.stringMatching(/confirm-delivered/),
    });
    const record = await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'confirm-delivered', by: 'ops', reason: 'in the delivery log' }],
    });
    expect(record).toMatchObject({ decision: 'confirm-delivered', by: 'ops', outcome: 'applied' });
    await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
    expect(callNames(world, ['sendRefundNotice', 'confirmNoticeDelivered', 'checkCompletion'])).toEqual([
      'sendRefundNotice',
      'confirmNoticeDelivered',
      'checkCompletion',
    ]);
    const after = await handle.query(stepsQuery);
    expect(after.steps.find((s) => s.name === 'notify_customer')).toMatchObject({
      status: 'completed',
      note: expect.stringMatching(/^delivered, as ops confirmed: in the delivery log/),
    });
  });

  test('a resend a second person rejects is not sent: the run waits again, and a confirmation completes it', async () => {
    const { world, handle } = await t.start({ over: { sendRefundNotice: unknownNotice } });
    await stopped(handle);
    const proposal = await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', step: 'notify_customer', by: 'ops', reason: 'resend it' }],
    });
    expect(proposal).toMatchObject({ outcome: 'awaiting_approval' });
    expect((await handle.query(stepsQuery)).status).toBe('awaiting_approval');
    await expect(
      handle.executeUpdate(decisionUpdate, {
        args: [{ decision: 'reject', by: 'lead', reason: 'check the mailbox first' }],
      }),
    ).resolves.toMatchObject({ decision: 'reject', answers: proposal.seq });
    const state = await handle.query(stepsQuery);
    expect(state.status).toBe('needs_attention');
    expect(state.decisions.map((d) => [d.decision, d.outcome])).toEqual([
      ['retry-step', 'rejected'],
      ['reject', 'applied'],
    ]);
    await handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'confirm-delivered', by: 'ops', reason: 'in the delivery log' }],
    });
    await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
    expect(callNames(world, ['sendRefundNotice'])).toHaveLength(1);
  });

  // Moved from test/integration/decisions.test.ts: the Update's validator.
  test('confirm-delivered is refused for a step whose outcome is known', async () => {
    const { handle } = await parkedAtGate();
    await expect(
      handle.executeUpdate(decisionUpdate, {
        args: [{ decision: 'confirm-delivered', by: 'ops', reason: 'it is there' }],
      }),
    ).rejects.toMatchObject({
      cause: {
        message: expect.stringMatching(
          /nothing to confirm: confirm-delivered settles notify_customer when its outcome is unknown; the run stopped at completion_gate/,
        ),
      },
    });
    await handle.terminate('test over');
  });
});

describe('compensations a person decides', () => {
  test('a correction whose outcome is unknown is quarantined, never resent blind; compensate, approved, resends it under the same key', async () => {
    let lost = true;
    const { world, handle } = await t.start({
      world: (w) => (w.settlesAs = 'failed'),
      over: {
        sendRefundCorrection: (_, next) =>
          lost ? Promise.reject(failure('UNKNOWN_OUTCOME', 'may_have_executed', 'no_reply_after_data')) : next(),
      },
    });
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
    expect(callNames(world, ['sendRefundCorrection'])).toHaveLength(1);

    lost = false;
    await expect(
      handle.executeUpdate(decisionUpdate, {
        args: [{ decision: 'compensate', by: 'ops', reason: 'not in the mailbox log' }],
      }),
    ).resolves.toMatchObject({ outcome: 'awaiting_approval' });
    expect((await handle.query(stepsQuery)).status).toBe('awaiting_approval');
    expect((await handle.describe()).searchAttributes).toMatchObject({
      RefundStatus: ['awaiting_approval'],
      RefundNeedsAttention: [true],
    });
    await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'approve', by: 'lead', reason: 'ok to resend' }] });
    await expect(handle.result()).resolves.toMatchObject({ status: 'compensated' });
    const corrections = world.calls
      .filter((c) => c.name === 'sendRefundCorrection')
      .map((c) => c.input as { key: string; resendApprovedAt?: string });
    expect(corrections).toHaveLength(2);
    expect(corrections[1]!.key).toBe(corrections[0]!.key);
    expect(corrections[1]!.resendApprovedAt).toEqual(expect.any(String));
  });
});

describe('signed decisions (DECIDERS with keys, no DECISIONS_UNSIGNED)', () => {
  const ops = newKeyPair();
  const lead = newKeyPair();
  // One person under two names, with one key: the key, not the name, is who decided.
  const SIGNED_POLICY = {
    ...TEST_POLICY,
    decisions: {
      roles: { ...TEST_POLICY.decisions.roles, 'ops-too': ['approver' as const] },
      keys: { ops: ops.publicKey, lead: lead.publicKey, 'ops-too': ops.publicKey },
      needApproval: ['abandon'],
      approvalTtlMs: 60_000,
    },
  };
  const signed = async (
    handle: Handle,
    fields: Parameters<typeof signDecision>[0],
    key = ops,
    over: { workflowId?: string; answers?: string; ttlMs?: number; now?: number } = {},
  ) => {
    const state = await handle.query(stepsQuery);
    const to = { workflowId: over.workflowId ?? handle.workflowId, answers: over.answers ?? decisionAddress(state) };
    return signDecision(fields, to, key, over.ttlMs ?? 600_000, over.now);
  };
  const refusal = (handle: Handle, input: DecisionInput) =>
    handle.executeUpdate(decisionUpdate, { args: [input] }).then(
      () => 'applied',
      (e: WorkflowUpdateFailedError) => e.cause?.message,
    );

  test('refused unsigned, tampered, expired, replayed, mis-addressed or approved with the proposing key; taken when signed, with the key id in the audit trail', async () => {
    const { world, handle } = await parkedAtGate((w) => (w.settings.policy = SIGNED_POLICY));
    const before = await idleHistoryLength(handle);
    const abandon = { decision: 'abandon' as const, by: 'ops', reason: 'refunded by hand' };

    expect(await refusal(handle, abandon)).toMatch(/unsigned decision refused: abandon needs ops's signature/);
    const tampered = await signed(handle, abandon);
    expect(await refusal(handle, { ...tampered, reason: 'something else' })).toMatch(
      new RegExp(`the signature does not verify with ops's key ${ops.keyId}: the decision was changed after signing`),
    );
    expect(await refusal(handle, { ...(await signed(handle, abandon, lead)) })).toMatch(
      /does not verify with ops's key/,
    );
    expect(
      await refusal(handle, await signed(handle, abandon, ops, { now: Date.now() - 7200_000, ttlMs: 3600_000 })),
    ).toMatch(/the signature expired at/);
    expect(await refusal(handle, await signed(handle, abandon, ops, { ttlMs: 48 * 3600_000 }))).toMatch(
      /more than 24 h ahead/,
    );
    // An impossible date parses to NaN, which no comparison with the clock refuses: refused as no date.
    expect(
      await refusal(handle, { ...tampered, signed: { ...tampered.signed!, expiresAt: '2026-13-40T25:00:00Z' } }),
    ).toMatch(/must be a real date/);
    expect(await refusal(handle, await signed(handle, abandon, ops, { workflowId: 'refund-other-v1' }))).toMatch(
      /addressed to refund-other-v1, not to this run/,
    );
    const runId = (await handle.query(stepsQuery)).runId;
    expect(
      await refusal(
        handle,
        await signed(handle, abandon, ops, { answers: `run-${runId}:parked-2026-01-01T00:00:00.000Z:after-0` }),
      ),
    ).toMatch(/answers run-.*:parked-2026-01-01T00:00:00.000Z:after-0, but the run is now at run-.*:parked-/);
    // Signed for the same parking of another run of this workflow id (before a reset, say): refused too.
    const current = decisionAddress(await handle.query(stepsQuery));
    expect(current.startsWith(`run-${runId}:parked-`)).toBe(true);
    expect(
      await refusal(handle, await signed(handle, abandon, ops, { answers: current.replace(runId, 'an-earlier-run') })),
    ).toMatch(/answers run-an-earlier-run:parked-.*, but the run is now at run-/);
    expect(await historyLength(handle)).toBe(before);

    const proposal = await signed(handle, abandon);
    expect(await handle.executeUpdate(decisionUpdate, { args: [proposal], updateId: 'proposal' })).toMatchObject({
      outcome: 'awaiting_approval',
      keyId: ops.keyId,
      nonce: proposal.signed!.nonce,
    });
    // The same signed decision again, under another Update id: taken once.
    expect(await refusal(handle, proposal)).toMatch(
      /replayed: this signed decision .* was already taken as decision #1/,
    );
    // Addressed to the parking before the proposal: an approval answers the proposal just taken.
    const approve = { decision: 'approve' as const, by: 'lead', reason: 'checked the ledger' };
    expect(await refusal(handle, await signed(handle, approve, lead, { answers: tampered.signed!.answers }))).toMatch(
      /but the run is now at run-.*:parked-.*:after-1/,
    );
    expect(await refusal(handle, await signed(handle, { ...approve, by: 'ops-too' }, ops))).toMatch(
      new RegExp(`signed with the key that proposed abandon \\(${ops.keyId}\\); a second person's key must approve it`),
    );
    expect(await handle.executeUpdate(decisionUpdate, { args: [await signed(handle, approve, lead)] })).toMatchObject({
      outcome: 'applied',
      keyId: lead.keyId,
    });
    await expect(handle.result()).resolves.toMatchObject({ status: 'abandoned' });
    expect(world.audit.find((a) => a.event === 'decision')?.detail).toMatchObject({
      decision: 'abandon',
      by: 'ops',
      keyId: ops.keyId,
      approvedBy: 'lead',
      approvedByKeyId: lead.keyId,
    });
  });

  test('reconcile, which only looks, needs no signature; deciders without keys take no unsigned decision', async () => {
    let answers = false;
    const { handle } = await t.start({
      over: {
        createRefund: async (_, next) => {
          await next();
          throw failure('UNKNOWN_OUTCOME', 'may_have_executed', 'timeout');
        },
        reconcileRefund: async (_, next) =>
          answers ? next() : Promise.reject(failure('TRANSIENT_DEPENDENCY', 'not_executed', 'server_error')),
      },
      world: (w) =>
        (w.settings.policy = {
          ...SIGNED_POLICY,
          rules: TEST_POLICY.rules.map((r) =>
            r.code === 'UNKNOWN_OUTCOME' && r.boundary === 'stripe' ? { ...r, maxAttempts: 2 } : r,
          ),
        }),
    });
    expect((await stopped(handle)).state.parked).toMatchObject({ failedStep: 'create_refund' });
    answers = true;
    await expect(
      handle.executeUpdate(decisionUpdate, { args: [{ decision: 'reconcile', by: 'sweep', reason: 'sweep' }] }),
    ).resolves.toMatchObject({ outcome: 'applied', keyId: null });
    completed(await handle.result());

    // Deciders read from a worker whose policy has no keys at all (earlier code, mid-deploy): no key is known, so a
    // decision by name alone is refused, not taken.
    const keyless: Partial<DecisionPolicy> = { ...SIGNED_POLICY.decisions, needApproval: [] };
    delete keyless.keys;
    const decisions = keyless as DecisionPolicy;
    const { handle: older } = await parkedAtGate((w) => (w.settings.policy = { ...TEST_POLICY, decisions }));
    expect(await refusal(older, { decision: 'abandon', by: 'ops', reason: 'old run' })).toMatch(
      /unsigned decision refused: abandon needs ops's signature/,
    );
    await older.terminate('the case is done');
  });
});
