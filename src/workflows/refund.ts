// The refund saga: load the order and commit the operation's intent → create the refund (Stripe)
// → update the order → notify the customer → the completion gate. Deterministic: every effect
// happens in an activity; every failure is decided by the recovery policy; an unknown outcome is
// reconciled with the provider, never resent blind.
import { ApplicationFailure, CancellationScope, condition, isCancellation, setHandler, sleep, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { pooledActivities } from './pools';
import type { RefundActivities } from '../activities';
import type { CheckCompletionInput } from '../activities/completion-gate';
import type { CreateRefundInput } from '../activities/payments';
import { compensationPlan, correctsUnknownNotice } from '../compensations/plan';
import { compensationOrder, REFUND_SAGA, REFUND_STEPS, type RefundStep } from '../compensations/registry';
import {
  type AwaitingProvider,
  type BeginResult,
  beginResultSchema,
  compensationKey,
  type CompletedRefund,
  decideUpdate,
  type DecisionRecord,
  type EndedRefund,
  evidenced,
  gateResultSchema,
  notificationReceiptSchema,
  type GateResult,
  MAX_RESUBMISSIONS,
  orderReceiptSchema,
  providerEventSchema,
  providerEventSignal,
  refundReceiptSchema,
  type RefundResult,
  SEARCH_ATTRIBUTES,
  standingRecordsSchema,
  type StepError,
  stepKey,
  stepsQuery,
  type OrderReceipt,
  type RefundReceipt,
} from '../contract';
import { lifecycleRank } from '../domain/order';
import { parseRefundRequest, type RefundRequestInput } from '../domain/refund-request';
import { backoffDelay, decide, DEFAULT_AWAIT_PROVIDER, retries, withJitter } from '../reliability/policy';
import type { Chosen } from './decisions';
import { failingTheUpdateOnly, setSignalHandler } from './messages';
import { furthestEvent } from './provider-events';
import { reconcile, type ReconcileTarget } from './reconcile';
import { RefundRun, RunStopped } from './refund-run';
import { StepFailedError, stepError } from './step-runner';
import { AWAIT_PROVIDER, conditionTimeout, decideVersion, isPatched, PARKING, reviewFixes } from './versions';
import { retryCreateText } from '../reliability/verdict';

/** The audit entries a run leaves: bookkeeping, outside the run's budgets. */
const BOOKKEEPING = { startToCloseTimeout: '10s', retry: { maximumAttempts: 3 } } as const;
/** Provider requests one completion-gate attempt sends: the refund retrieved, the payment intent's refunds listed. */
const GATE_REQUESTS = 2;

export async function refundWorkflow(input: RefundRequestInput): Promise<RefundResult> {
  decideVersion();
  let run: RefundRun;
  try {
    run = new RefundRun(parseRefundRequest(input));
  } catch (err) {
    // Refused before anything ran; still findable as rejected.
    const orderId = (input as { orderId?: unknown } | null)?.orderId;
    const validOrderId = typeof orderId === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(orderId) ? orderId : null;
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.status, value: 'rejected' },
      { key: SEARCH_ATTRIBUTES.step, value: 'validate' },
      ...(validOrderId ? [{ key: SEARCH_ATTRIBUTES.orderId, value: validOrderId }] : []),
    ]);
    const reason = (err as Error).message;
    if (!isPatched(PARKING)) {
      throw ApplicationFailure.nonRetryable(`refund rejected: ${reason}`, 'REFUND_REJECTED', { status: 'rejected', outcome: { status: 'rejected', failedStep: null, reason } });
    }
    return { workflowId: workflowInfo().workflowId, orderId: validOrderId, operationId: null, status: 'rejected', reason, failedStep: null };
  }
  setHandler(stepsQuery, () => run.view());
  // A malformed message is ignored or refused, never a failed workflow task; runs begun before the schema take events as they did.
  setSignalHandler(providerEventSignal, reviewFixes() ? providerEventSchema : null, (event) => run.recordProviderEvent(event), run.ignored);
  setHandler(
    decideUpdate,
    (decision) =>
      failingTheUpdateOnly('the decision', () => {
        const record = run.desk.apply(decision);
        run.noteDecision();
        return record;
      }),
    { validator: (decision) => run.desk.validate(decision) },
  );

  let next = () => carryOut(run, 'load_order');
  for (;;) {
    try {
      const result = await next();
      run.finish('completed', 'every check of the completion gate passed', null);
      await handOverLateFailure(run);
      return result;
    } catch (err) {
      if (isCancellation(err)) {
        await CancellationScope.nonCancellable(() => cancelled(run));
        throw err;
      }
      // A step failure no branch decided on still stops the run with its reason, never fails its workflow task forever.
      const stopped = err instanceof StepFailedError ? new RunStopped('needs_attention', `${err.step} failed: ${err.error.code}: ${err.error.message}`, null) : err;
      if (!(stopped instanceof RunStopped)) throw err;
      if (!isPatched(PARKING)) {
        run.finish(stopped.status, stopped.reason, stopped.failedStep, stopped.quarantined);
        await CancellationScope.nonCancellable(() => audit(run, stopped.status, stopped.reason, stopped.failedStep));
        throw ApplicationFailure.nonRetryable(`refund ${stopped.status}: ${stopped.reason}`, `REFUND_${stopped.status.toUpperCase()}`, run.view());
      }
      if (stopped.status !== 'needs_attention') return ended(run, stopped.status, stopped.reason, stopped.failedStep);

      // Who may decide is read as the workers are configured now, also for a run that never loaded its settings.
      await pooledActivities<RefundActivities>(BOOKKEEPING)
        .decisionPolicy()
        .then((decisions) => run.useDecisionPolicy(decisions), () => undefined);
      run.park(stopped);
      await audit(run, 'needs_attention', stopped.reason, stopped.failedStep, 'run_parked', { verdict: run.parked?.verdict });
      let chosen: Chosen | 'provider_failed';
      try {
        // The provider reporting the refund failed is not a decision to wait for: the registry compensates that without asking.
        const news = () => !run.desk.awaitingApproval && run.ctx.refund !== undefined && run.unactedFailure() !== undefined && !run.checkedFailures.has(run.unactedFailure()!.id);
        const failed = isPatched(AWAIT_PROVIDER) ? condition(news).then(() => 'provider_failed' as const) : new Promise<never>(() => undefined);
        chosen = await Promise.race([run.desk.next(), failed]);
        // A decide Update and the failure in one workflow task: the race may pick either, the decision must win.
        if (reviewFixes()) chosen = run.desk.firstOf(chosen);
      } catch (waitErr) {
        // Cancelled while it waited for a person: it still says what it leaves behind, and compensates what it can.
        if (isCancellation(waitErr)) await CancellationScope.nonCancellable(() => cancelled(run));
        throw waitErr;
      }
      if (chosen === 'provider_failed') {
        const event = run.unactedFailure()!;
        run.checkedFailures.add(event.id);
        await audit(run, 'running', `${event.type} ${event.id} says refund ${event.refundId} is ${event.refundStatus}: the provider is asked, and what it confirms is compensated`, stopped.failedStep, 'decision', {
          decision: 'provider_event',
          by: 'provider',
          eventId: event.id,
        });
        run.unpark();
        run.budget.renew(Date.now());
        next = () => carryOut(run, 'completion_gate');
        continue;
      }
      const { record } = chosen;
      const approval = run.desk.records.find((r) => r.answers === record.seq && r.decision === 'approve');
      await audit(run, chosen.kind, record.reason, stopped.failedStep, 'decision', {
        decision: record.decision,
        by: record.by,
        seq: record.seq,
        ...(approval && { approvedBy: approval.by, approvalReason: approval.reason }),
      });
      if (chosen.kind === 'abandon') return ended(run, 'abandoned', `abandoned by ${record.by}: ${record.reason}`, stopped.failedStep);
      if (chosen.kind === 'expired') {
        const reason = `${record.decision} proposed by ${record.by} was not approved before ${record.expiresAt}; the run stops and nothing more is done`;
        // Stopped is the safe default, never proceeding; what the run leaves unsettled still waits for a person.
        const result = await ended(run, 'stopped', reason, stopped.failedStep);
        if (run.leavesWorkBehind()) run.flagForAttention();
        return result;
      }
      run.unpark();
      run.budget.renew(Date.now());
      // A resend a person approved covers the hand-over they judged, which began before their decision, and no later one.
      const resendApprovedAt = record.at;
      if (chosen.kind === 'compensate') next = () => compensate(run, { resendApprovedAt });
      else if (chosen.kind === 'reconcile') next = () => reconcileParked(run);
      else if (chosen.kind === 'confirm-delivered') next = () => confirmDelivered(run, record);
      else {
        const { step } = chosen;
        // A notice whose hand-over ended unknown is sent again only on a person's decision, with the same Message-ID.
        const resend = step === 'notify_customer' && run.steps.get('notify_customer').error?.code === 'UNKNOWN_OUTCOME';
        const { refund, partialNote } = run.ctx;
        // A partial refund keeps its email frozen: retrying only repairs the order to what was refunded.
        if (run.effect.status === 'partial' && refund && partialNote !== undefined) next = () => partialRefund(run, refund, partialNote);
        // A person's retry of the refund looks it up at the provider first: one that exists is never sent again.
        else if (step === 'create_refund' && reviewFixes()) next = () => reconcileParked(run, true);
        else next = () => carryOut(run, step, resend ? { resendApprovedAt } : {});
      }
    }
  }
}

/** Ends the run with an outcome that is a result, not a failure. */
async function ended(run: RefundRun, status: EndedRefund['status'], reason: string, failedStep: RefundStep | null): Promise<EndedRefund> {
  run.end(status, reason, failedStep);
  await CancellationScope.nonCancellable(() => audit(run, status, reason, failedStep));
  await handOverLateFailure(run);
  return { workflowId: run.workflowId, orderId: run.request.orderId, operationId: run.ctx.operationId || null, status, reason, failedStep };
}

/**
 * A run ending while it holds the provider's word that its refund failed, not acted on (it was
 * parked or abandoned meanwhile, or the provider's API still said succeeded), hands it to the
 * operation's follow-up run, which asks the provider again and compensates what it confirms.
 */
async function handOverLateFailure(run: RefundRun): Promise<void> {
  const event = run.unactedFailure();
  if (!event || !isPatched(AWAIT_PROVIDER)) return;
  await CancellationScope.nonCancellable(() =>
    pooledActivities<RefundActivities>({ ...BOOKKEEPING, retry: { maximumAttempts: 10 } })
      .handToFollowUp({ operationId: run.ctx.operationId, event, workflowTaskQueue: workflowInfo().taskQueue })
      .catch((err: unknown) => {
        // The event stays in the store, the run's state and inspect, for a person.
        if (isCancellation(err)) throw err;
      }),
  );
}

/**
 * Cancelled by an operator: what was started is finished honestly. A refund that did not go
 * through has its finished steps compensated (compensations never stop for a cancellation); one
 * that stands or may stand is left to a person, and the run says which.
 */
async function cancelled(run: RefundRun): Promise<void> {
  // With the review's fixes, the plan reads what stands from the store, and its verdict is the cancellation's.
  const planned = reviewFixes();
  const was = run.status;
  let compensation: RunStopped | undefined;
  if (isPatched(PARKING) && run.effect.status === 'failed' && (planned || run.cannotCompensate() === null)) {
    compensation = await compensate(run, {}).catch((err: unknown) => {
      if (!(err instanceof RunStopped)) throw err;
      return err;
    });
  }
  // A create that had started may be going on at the provider: then it is unknown, never "not sent".
  const sentOrSending = run.steps.get('create_refund').status !== 'pending';
  const effect = run.effect.status !== 'none' ? run.effect.status : sentOrSending ? 'unknown' : 'not sent';
  if (effect === 'unknown') run.effect = { ...run.effect, status: 'unknown', certainty: 'may_have_executed' };
  const compensated = run.steps.table().some((s) => s.compensation?.status === 'completed') ? ', its finished steps compensated' : '';
  // Nothing left for anyone: the refund never went out, or it failed and every compensation completed.
  const settled = isPatched(PARKING) && (planned && compensation ? compensation.status === 'compensated' : !run.leavesWorkBehind());
  const why = planned && compensation && !settled ? ` (${compensation.reason})` : '';
  // What the run was doing when cancelled, not the compensating it did since.
  const status = planned ? was : run.status;
  const reason = settled
    ? `cancelled while ${status}; the refund is ${effect}${compensated}: nothing is left to do`
    : `cancelled while ${status}; the refund is ${effect}${compensated}: a person finishes what was started${why}`;
  if (settled) run.end(effect === 'failed' ? 'compensated' : 'stopped', reason, null);
  else {
    run.finish('needs_attention', reason, null);
    if (isPatched(PARKING)) run.flagForAttention();
  }
  await audit(run, 'cancelled', reason, null);
  // The provider's word that the refund failed, received while the run waited, is the follow-up's to act on, as when a run ends.
  if (planned) await handOverLateFailure(run);
}

/**
 * The saga from `from` on: a retry-step decision resumes at the step that failed, the steps before
 * it keeping their outputs; every step is idempotent, so a reset run replays its receipts too.
 */
async function carryOut(run: RefundRun, from: RefundStep, retry: { resendApprovedAt?: string } = {}): Promise<CompletedRefund> {
  const { request, ctx } = run;
  const due = (step: RefundStep) => REFUND_STEPS.indexOf(step) >= REFUND_STEPS.indexOf(from);
  if (due('load_order') || !run.begin) await loadOrder(run);
  const begin = run.begin!;
  const op = begin.operation;
  const key = (step: RefundStep) => stepKey(op.operationId, step);

  if (due('create_refund')) {
    // An operation whose own refund exists finishes its order update and email whatever came after it.
    if (!op.refund) await settleEarlier(run, begin);
    const refundInput = {
      orderId: request.orderId,
      operationId: op.operationId,
      paymentIntentId: begin.order.paymentIntentId,
      amount: request.amount,
      currency: request.currency,
      reason: request.reason,
      idempotencyKey: key('create_refund'),
    };
    ctx.refund = await createRefund(run, refundInput, targetOf(op.operationId, request, begin.order.paymentIntentId));
    run.noteFirstSend();
    run.effect = { status: 'refunded', certainty: 'completed', refundId: ctx.refund.refundId };
  }
  const refund = ctx.refund!;

  if (due('update_order')) ctx.orderReceipt = await updateOrder(run, refund.refundId, refund.amount, key('update_order'));

  const noticeKey = key('notify_customer');
  if (due('notify_customer')) {
    const noticeInput = {
      key: noticeKey,
      operationId: op.operationId,
      orderId: request.orderId,
      amount: refund.amount,
      currency: refund.currency,
      refundId: refund.refundId,
      ...(retry.resendApprovedAt && { resendApprovedAt: retry.resendApprovedAt, ...judgedHandOver(run) }),
    };
    ctx.notice = await attempt(run, 'notify_customer', () =>
      run.step('notify_customer', noticeInput, noticeInput.key, 'smtp', evidenced(notificationReceiptSchema), (a) => a.sendRefundNotice(noticeInput), { sends: true }),
    );
  }

  await completionGate(run, {
    operationId: op.operationId,
    orderId: request.orderId,
    paymentIntentId: begin.order.paymentIntentId,
    refundId: refund.refundId,
    amount: request.amount,
    currency: request.currency,
    noticeKey,
    idempotencyKey: key('create_refund'),
  });
  return {
    workflowId: run.workflowId,
    orderId: request.orderId,
    operationId: op.operationId,
    status: 'completed',
    refund,
    order: ctx.orderReceipt!,
    notification: ctx.notice!,
  };
}

/**
 * A person looked for the notice whose hand-over ended unknown and found it delivered: the outbox
 * records it as sent on their word, naming them (nothing is sent), the step completes, and the
 * completion gate judges the run as always.
 */
async function confirmDelivered(run: RefundRun, record: DecisionRecord): Promise<CompletedRefund> {
  const key = stepKey(run.ctx.operationId, 'notify_customer');
  const input = { key, operationId: run.ctx.operationId, by: record.by, reason: record.reason };
  const unknown = run.steps.get('notify_customer').error;
  run.ctx.notice = await attempt(run, 'notify_customer', async () => {
    try {
      return await run.step('notify_customer', input, key, 'store', evidenced(notificationReceiptSchema), (a) => a.confirmNoticeDelivered(input), { essential: true });
    } catch (err) {
      // A confirmation that recorded nothing leaves the hand-over as unknown as before: that stays the step's
      // error, so the run parks as it was and confirm-delivered or a resend can still settle it.
      if (!(err instanceof StepFailedError) || err.error.certainty !== 'not_executed' || !unknown) throw err;
      run.steps.fail('notify_customer', unknown);
      run.steps.note('notify_customer', `confirm-delivered by ${record.by} was not recorded: ${err.error.code}: ${err.error.message}`);
      throw new StepFailedError('notify_customer', unknown);
    }
  });
  run.steps.note('notify_customer', `delivered, as ${record.by} confirmed: ${record.reason}`);
  return carryOut(run, 'completion_gate');
}

/** Loads the order and commits the operation's intent: the run's identity, settings and budgets come from here. */
async function loadOrder(run: RefundRun): Promise<void> {
  const { request, ctx, steps } = run;
  const begin = await attempt(run, 'load_order', () =>
    run.step('load_order', { orderId: request.orderId, operationVersion: request.operationVersion }, undefined, 'store', evidenced(beginResultSchema), (a) =>
      a.beginOperation({ request }),
    ),
  );
  run.begin = begin;
  run.noteRecord(begin.operation);
  run.settings = begin.settings;
  run.budget.adopt(begin.settings.policy.budget);
  // The step table names the policy; the whole table is in the activity's result in history.
  steps.get('load_order').output = { ...begin, settings: { scope: begin.settings.scope, policyVersion: begin.settings.policy.version, provider: begin.settings.provider } };
  const op = begin.operation;
  ctx.operationId = op.operationId;
  ctx.order = begin.order;
  run.operation = {
    operationId: op.operationId,
    operationVersion: op.operationVersion,
    scope: op.scope,
    requestHash: op.requestHash,
    recordedByThisRun: begin.created,
    dedupeWindowExpiresAt: op.firstSentAt ? new Date(Date.parse(op.firstSentAt) + begin.settings.provider.dedupeWindowMs).toISOString() : null,
    expectedReceipt: `one Stripe refund of ${request.amount} ${request.currency} on ${begin.order.paymentIntentId} with metadata.operation_id = ${op.operationId}`,
    policyVersion: begin.settings.policy.version,
  };
  if (op.refund) run.effect = { status: op.status === 'partial' ? 'partial' : 'refunded', certainty: 'completed', refundId: op.refund.refundId };
  if (begin.problem) {
    const error = stepError('PERMANENT_BUSINESS', 'not_executed', 'refund_not_possible', begin.problem);
    steps.fail('load_order', error);
    run.remember('load_order', 'store', error);
    decideStop(run, 'load_order', error);
  }
}

/**
 * Earlier operations on this order whose effect the order may not show come first, since this one
 * could refund on top of them; this run never sends another operation's request, and once this
 * later version exists the store never lets an earlier one send. Each is asked about at the
 * provider: proven absent or failed, it is settled; if its refund exists, it is recorded on the
 * order and this run stops for a person, since it was asked for while that refund looked lost or
 * pending; still unknown, this run waits within its budget, then stops.
 */
async function settleEarlier(run: RefundRun, begin: BeginResult): Promise<void> {
  const { request } = run;
  for (const other of begin.blockers) {
    run.setStatus('reconciling', 'load_order');
    const settled = await reconcile(run, targetOf(other.operationId, other.request, begin.order.paymentIntentId), false);
    if (settled.kind === 'completed' || settled.kind === 'partial') return recordEarlier(run, other.operationId, settled.refund);
    if (settled.kind === 'unknown') {
      run.stop(
        'needs_attention',
        `earlier operation ${other.operationId} on order ${request.orderId} has an unknown outcome (${settled.note}); this operation waits until it is reconciled, so that nothing is refunded on top of it`,
        'load_order',
      );
    }
  }
  run.setStatus('running');
}

/** An earlier operation's refund exists: put it on the order (its own forward repair, idempotent by its id) and stop this run. */
async function recordEarlier(run: RefundRun, operationId: string, refund: RefundReceipt): Promise<never> {
  const { request } = run;
  const earlier = { key: stepKey(operationId, 'update_order'), orderId: request.orderId, operationId, refundId: refund.refundId, amount: refund.amount };
  const recorded = await run.call('record earlier refund', 'store', evidenced(orderReceiptSchema), (a) => a.applyRefund(earlier), { essential: true }).then(
    () => 'it is now recorded on the order',
    (err: unknown) => {
      if (!(err instanceof StepFailedError)) throw err;
      return `recording it on the order failed (${err.error.message})`;
    },
  );
  return run.stop(
    'needs_attention',
    `earlier operation ${operationId} turned out to have refunded ${refund.amount} ${refund.currency} (${refund.refundId}); ${recorded}. ` +
      'This operation was asked for while that refund looked lost or pending, so nothing was sent for it: if it is still wanted, start it again and it is checked against what is left to refund',
    'load_order',
  );
}

function targetOf(operationId: string, request: { amount: number; currency: string }, paymentIntentId: string): ReconcileTarget {
  return { operationId, paymentIntentId, amount: request.amount, currency: request.currency, idempotencyKey: stepKey(operationId, 'create_refund') };
}

/**
 * The refund: sent, or (when its outcome is unknown) reconciled with the provider. Resent with the
 * same key only when reconciliation proved no refund exists, or inside the key's dedupe window.
 */
async function createRefund(run: RefundRun, input: CreateRefundInput, target: ReconcileTarget): Promise<RefundReceipt> {
  for (;;) {
    try {
      const receipt = await run.step('create_refund', input, input.idempotencyKey, 'stripe', evidenced(refundReceiptSchema), (a) => a.createRefund(input), { sends: true });
      return checkReceipt(run, receipt);
    } catch (err) {
      run.noteFirstSend();
      if (!(err instanceof StepFailedError)) throw err;
      // A retry that ran out while the effect was uncertain (a 5xx, a key still in flight), or a refund
      // made whose receipt could not be kept, falls to reconciliation too: the provider says what happened.
      const action = run.recovery?.action;
      const uncertain = err.error.certainty !== 'not_executed' && (action === 'retry' || action === 'repair' || err.error.certainty === 'completed');
      if (action !== 'reconcile' && !uncertain) decideStop(run, 'create_refund', err.error);
    }
    // A refund made whose receipt could not be kept is looked up by its id.
    const madeId = run.lastFailure?.provider.refundId;
    run.effect = { status: 'unknown', certainty: run.lastFailure?.certainty ?? 'undeterminable', refundId: typeof madeId === 'string' ? madeId : null };
    run.setStatus('reconciling', 'create_refund');
    const settled = await reconcile(run, typeof madeId === 'string' ? { ...target, refundId: madeId } : target, true);
    switch (settled.kind) {
      case 'completed':
        run.steps.resolve('create_refund', settled.refund, `receipt from reconciliation: ${settled.note}`);
        run.setStatus('running');
        return checkReceipt(run, settled.refund);
      case 'partial':
        return partialRefund(run, settled.refund, settled.note);
      case 'failed':
        run.effect = { status: 'failed', certainty: 'completed', refundId: settled.refund.refundId };
        return run.stop('needs_attention', `the provider failed refund ${settled.refund.refundId}: ${settled.note}. Nothing was refunded and the customer was not emailed; a person decides what happens next`, 'create_refund');
      case 'absent':
      case 'resubmit':
        if (run.reconciliation.resubmissions >= MAX_RESUBMISSIONS) {
          run.stop('needs_attention', `the refund's outcome stayed unknown through ${MAX_RESUBMISSIONS} resubmissions (${settled.note}); nothing more is sent`, 'create_refund');
        }
        run.reconciliation.resubmissions += 1;
        run.steps.note('create_refund', settled.note);
        run.setStatus('running');
        continue;
      case 'unknown':
        return run.stop(
          'needs_attention',
          `the refund's outcome is unknown: ${settled.note}. Nothing more is sent and nothing is claimed: reconcile operation ${target.operationId} with the provider before any new attempt`,
          'create_refund',
        );
    }
  }
}

/**
 * A parked run whose refund is unknown, asked to look again (by a person or the scheduled sweep):
 * lookups only, nothing is sent. Found, the saga goes on from the order update, as it would have
 * had the answer arrived; still unknown or proven absent, it parks again for a person. A person's
 * retry-step (`send`) looks the same way, and sends only what the provider proved absent, or
 * resends with the same key while the provider still deduplicates it.
 */
async function reconcileParked(run: RefundRun, send = false): Promise<CompletedRefund> {
  const begin = run.begin!;
  const target = targetOf(begin.operation.operationId, run.request, begin.order.paymentIntentId);
  const known = run.effect.refundId;
  run.setStatus('reconciling', 'create_refund');
  const settled = await reconcile(run, known ? { ...target, refundId: known } : target, send);
  switch (settled.kind) {
    case 'completed': {
      run.steps.resolve('create_refund', settled.refund, `receipt from reconciliation: ${settled.note}`);
      run.setStatus('running');
      run.ctx.refund = await checkReceipt(run, settled.refund);
      run.effect = { status: 'refunded', certainty: 'completed', refundId: run.ctx.refund.refundId };
      return carryOut(run, 'update_order');
    }
    case 'partial':
      return partialRefund(run, settled.refund, settled.note);
    case 'failed':
      run.effect = { status: 'failed', certainty: 'completed', refundId: settled.refund.refundId };
      return run.stop('needs_attention', `the provider failed refund ${settled.refund.refundId}: ${settled.note}. Nothing was refunded and the customer was not emailed`, 'create_refund');
    case 'absent':
    case 'resubmit':
      // Proven absent: nothing was refunded. Sending it now is a person's decision, not the sweep's.
      if (settled.kind === 'absent') run.effect = { status: 'none', certainty: 'not_executed', refundId: null };
      if (send) {
        run.steps.note('create_refund', settled.note);
        run.setStatus('running');
        return carryOut(run, 'create_refund');
      }
      return run.stop(
        'needs_attention',
        `reconciled again: ${settled.note}. Nothing was sent; a person decides whether to send it (${retryCreate()}) or abandon`,
        'create_refund',
      );
    default:
      return run.stop(
        'needs_attention',
        `reconciled again, and the refund is still not settled: ${settled.note}. Nothing was sent; a person decides (${retryCreate()})`,
        'create_refund',
      );
  }
}

/** What a retry-step on create_refund does in this run, as its texts tell a person. */
function retryCreate(): string {
  return retryCreateText(reviewFixes());
}

/**
 * What the provider's receipt says against what was asked: a refund for less is partial, one
 * already failed (a receipt on record from an earlier run) ends the run; only a full one goes on.
 */
async function checkReceipt(run: RefundRun, refund: RefundReceipt): Promise<RefundReceipt> {
  const { request } = run;
  if (refund.status === 'failed' || refund.status === 'canceled') {
    run.effect = { status: 'failed', certainty: 'completed', refundId: refund.refundId };
    return run.stop('needs_attention', `the provider's refund ${refund.refundId} for this operation is ${refund.status}: nothing was refunded, the order and the customer are left as they are; a person decides what happens next`, 'create_refund');
  }
  if (refund.currency !== request.currency || refund.amount < request.amount) {
    return partialRefund(run, refund, `refund ${refund.refundId} is ${refund.amount} ${refund.currency} of the ${request.amount} ${request.currency} asked`);
  }
  if (refund.amount > request.amount) {
    run.effect = { status: 'refunded', certainty: 'completed', refundId: refund.refundId };
    return run.stop('needs_attention', `refund ${refund.refundId} is ${refund.amount} ${refund.currency}, more than the ${request.amount} asked; it stands, and a person reconciles the difference`, 'create_refund');
  }
  return refund;
}

/**
 * The provider refunded less than asked. The order is repaired forward to what was really refunded;
 * the customer email is frozen, since it would tell them something untrue; a person decides the rest.
 */
async function partialRefund(run: RefundRun, refund: RefundReceipt, note: string): Promise<never> {
  run.effect = { status: 'partial', certainty: 'partial', refundId: refund.refundId };
  run.ctx.refund = refund;
  run.ctx.partialNote = note;
  run.steps.resolve('create_refund', refund, `partial: ${note}`);
  const key = stepKey(run.ctx.operationId, 'update_order');
  await updateOrder(run, refund.refundId, refund.amount, key);
  run.steps.skip('notify_customer', 'frozen: the refund is partial, and an email now would tell the customer something untrue');
  run.stop(
    'needs_attention',
    `partial refund: ${note}. The order was updated to what was really refunded (${refund.amount} ${refund.currency}); the customer was not emailed. ` +
      'A person decides: refund the rest under a new operation version, or tell the customer',
    'create_refund',
  );
}

async function updateOrder(run: RefundRun, refundId: string, amount: number, key: string): Promise<OrderReceipt> {
  const input = { key, orderId: run.request.orderId, operationId: run.ctx.operationId, refundId, amount };
  return attempt(run, 'update_order', () =>
    // Recording a refund that happened is never refused for spent retry time or provider calls.
    run.step('update_order', input, run.ctx.operationId, 'store', evidenced(orderReceiptSchema), (a) => a.applyRefund(input), { essential: true }),
  );
}

/**
 * The completion gate. A refund the provider has not settled yet (pending) is awaited: the run
 * waits for the provider's webhook, polls with the policy's backoff in case none comes, and parks
 * for a person once the policy's deadline passes. A signed webhook that says the refund succeeded
 * stands for the provider's receipt (no poll); one that says it failed is confirmed with the
 * provider before anything is undone. Events count by how far along they put the refund, so
 * duplicates and events out of order change nothing twice.
 */
async function completionGate(run: RefundRun, input: CheckCompletionInput): Promise<void> {
  if (!isPatched(AWAIT_PROVIDER)) return pollCompletion(run, input);
  const settings = run.policy.awaitProvider ?? DEFAULT_AWAIT_PROVIDER;
  // A person's retry-step after the deadline waits afresh.
  run.awaitingProvider = null;
  /** Events already acted on: each wakes the run once. */
  const seen = new Set<string>();
  const news = () => {
    const e = furthestEvent(run.providerEvents, input.refundId);
    return e && lifecycleRank(e.refundStatus) > 0 && !seen.has(e.id) ? e : undefined;
  };
  let gate = await checkGate(run, input, undefined);
  for (;;) {
    const waited = run.awaitingProvider;
    if (gate.verdict === 'pass') {
      // A failure reported while the gate looked is the provider's word against its own receipt: asked once more.
      const failure = news();
      if (failure && lifecycleRank(failure.refundStatus) === 2) {
        seen.add(failure.id);
        gate = await checkGate(run, input, undefined);
        continue;
      }
      if (waited) run.budget.renew(Date.now());
      return;
    }
    if (gate.verdict === 'refund_failed') {
      if (waited) run.budget.renew(Date.now());
      return compensate(run, { refund: gate.refund });
    }
    if (gate.verdict === 'mismatch') {
      run.stop('needs_attention', mismatchReason(gate), 'completion_gate');
    }
    const awaiting = waited ?? startAwaiting(run, input.refundId, settings.deadlineMs);
    const until = Date.parse(awaiting.until);
    if (Date.now() >= until) {
      awaiting.settledBy = { kind: 'deadline' };
      run.stop(
        'needs_attention',
        `refund ${gate.refund.refundId} is still ${gate.refund.status} at the provider ${awaiting.since} → ${awaiting.until} (the policy's awaitProvider deadline), ` +
          `after ${awaiting.polls} polls and no webhook that settled it; it stands, and a person follows it up`,
        'completion_gate',
      );
    }
    const backoff = backoffDelay({ backoff: settings.poll }, awaiting.polls + 1);
    const wait = conditionTimeout(Math.min(until - Date.now(), withJitter(backoff, settings.jitter, Math.random())));
    run.steps.await(
      'completion_gate',
      `refund ${input.refundId} is ${gate.refund.status} at the provider: awaiting its webhook until ${awaiting.until}; next poll in ${Math.round(wait / 1000)} s`,
    );
    await condition(() => news() !== undefined, wait);
    const event = news();
    if (event) seen.add(event.id);
    else awaiting.polls += 1;
    gate = await checkGate(run, input, event?.refundStatus === 'succeeded' ? event.id : undefined);
    if (gate.verdict !== 'pending') awaiting.settledBy = event ? { kind: 'webhook', eventId: event.id } : { kind: 'poll' };
  }
}

/**
 * Why a gate's disagreements park the run. With the review's fixes, a run whose own refund failed
 * beside another refund carrying the operation id names both: its own did not stand.
 */
function mismatchReason(gate: GateResult): string {
  const failed = gate.findings.filter((f) => !f.ok).map((f) => `${f.check}: ${f.observed}`);
  const own = gate.refund;
  const others = gate.otherRefundIds ?? [];
  const ownFailed = own.status === 'failed' || own.status === 'canceled';
  const stands =
    reviewFixes() && ownFailed && others.length > 0
      ? `This run's refund ${own.refundId} is ${own.status}, and ${others.join(', ')} carr${others.length === 1 ? 'ies' : 'y'} the operation id too and may stand: nothing is undone and no refund is sent again`
      : 'The refund stands and is never sent again';
  return `the completion gate found disagreements: ${failed.join('; ')}. ${stands}; a person must reconcile them`;
}

/** From the first pending answer: visible as awaiting_provider, held to the policy's deadline rather than the run's. */
function startAwaiting(run: RefundRun, refundId: string, deadlineMs: number): AwaitingProvider {
  const since = Date.now();
  const awaiting: AwaitingProvider = { refundId, since: new Date(since).toISOString(), until: new Date(since + deadlineMs).toISOString(), polls: 0, settledBy: null };
  run.awaitingProvider = awaiting;
  run.budget.holdUntil(since + deadlineMs + run.policy.timeouts.stripe.scheduleToCloseMs);
  run.setStatus('awaiting_provider', 'completion_gate');
  return awaiting;
}

/**
 * One look by the gate. The first is held to the run's budget like any provider call (a run that
 * spent it asks a person); while the run awaits the provider, its reads are held only to the wait's deadline.
 */
async function checkGate(run: RefundRun, input: CheckCompletionInput, providerEventId: string | undefined): Promise<GateResult> {
  const checked = { ...input, ...(providerEventId && { providerEventId }) };
  const gate = await attempt(run, 'completion_gate', () =>
    run.step('completion_gate', checked, undefined, 'stripe', evidenced(gateResultSchema), (a) => a.checkCompletion(checked), { essential: run.awaitingProvider !== null, requestsPerAttempt: GATE_REQUESTS }),
  );
  if (run.status === 'awaiting_provider' && gate.verdict !== 'pending') run.setStatus('running', 'completion_gate');
  return gate;
}

/** Runs from before the gate awaited webhooks: polls while the provider has not settled the refund, within the run's budget. */
async function pollCompletion(run: RefundRun, input: CheckCompletionInput): Promise<void> {
  const rule = decide(run.policy, 'UNKNOWN_OUTCOME', 'may_have_executed', 'stripe');
  for (let poll = 1; ; poll++) {
    const gate = await attempt(run, 'completion_gate', () =>
      run.step('completion_gate', input, undefined, 'stripe', evidenced(gateResultSchema), (a) => a.checkCompletion(input), { requestsPerAttempt: GATE_REQUESTS }),
    );
    if (gate.verdict === 'pass') return;
    if (gate.verdict === 'refund_failed') return compensate(run, { refund: gate.refund });
    if (gate.verdict === 'mismatch') {
      run.stop('needs_attention', mismatchReason(gate), 'completion_gate');
    }
    run.setStatus('awaiting_provider', 'completion_gate');
    const wait = withJitter(backoffDelay(rule, poll), rule.jitter, Math.random());
    if (poll >= rule.maxAttempts || wait > run.budget.waitableMs()) {
      run.stop('needs_attention', `refund ${gate.refund.refundId} is still ${gate.refund.status} at the provider after ${poll} checks; it stands, and a person follows it up`, 'completion_gate');
    }
    await sleep(wait);
    run.budget.spend({ provider: false, retryTimeMs: wait });
  }
}

/**
 * Undoes the finished steps in the registry's compensation order (each before the steps it
 * depends on; with today's registry, newest first, the order recorded histories replay), each
 * under its own key: when the provider failed the refund after accepting it (`refund`), on a
 * compensate decision, or on cancellation. A compensation that already completed is not run
 * again; one whose outcome was unknown is resent only on a person's decision (`resendApprovedAt`).
 * Compensations never stop for a cancellation.
 */
async function compensate(run: RefundRun, options: { refund?: RefundReceipt; resendApprovedAt?: string }): Promise<never> {
  const refund = options.refund ?? run.ctx.refund;
  if (options.refund) run.effect = { status: 'failed', certainty: 'completed', refundId: options.refund.refundId };
  run.setStatus('compensating', 'completion_gate');
  const reviewed = reviewFixes();
  // A decision or a cancellation keeps the failed refund's receipt and reason: the run's own receipt is the one from creation.
  if (reviewed && options.refund) run.ctx.failedRefund = options.refund;
  if (!reviewed || options.refund) run.ctx.correctionReason = refund?.status === 'canceled' ? 'refund_canceled' : 'refund_failed';
  // Runs from before parking let a cancellation reach their compensations; newer ones finish them.
  const finishing = <T>(fn: () => Promise<T>): Promise<T> => (isPatched(PARKING) ? CancellationScope.nonCancellable(fn) : fn());
  if (reviewed) return finishing(() => compensateStanding(run, run.ctx.failedRefund, options.resendApprovedAt));
  await finishing(async () => {
    for (const step of compensationOrder(run.steps.completed())) {
      const { undo } = REFUND_SAGA[step];
      if (undo.kind === 'forward_repair') run.steps.markNotCompensable(step, undo.note);
      if (undo.kind !== 'compensation') continue;
      await runCompensation(run, step, compensationKey(run.steps.get(step).idempotencyKey ?? stepKey(run.ctx.operationId, step)), options.resendApprovedAt, false);
    }
  });
  const left = run.steps.table().filter((s) => s.compensation?.kind === 'compensation' && s.compensation.status !== 'completed');
  const what = refund ? `the provider failed refund ${refund.refundId} after accepting it (${refund.status})` : 'the refund did not go through';
  if (left.length === 0) run.stop('compensated', `${what}. The finished steps were compensated in reverse order, each under its own key`, 'completion_gate');
  const unknown = left.filter((s) => s.compensation?.status === 'unknown').map((s) => s.name);
  run.stop(
    'needs_attention',
    unknown.length
      ? `${what}. The outcome of ${unknown.join(', ')}'s compensation is unknown: it is quarantined, never retried blind; a person checks it (the step table has its key and Message-ID)`
      : `${what}. A compensation failed: see the step table; a person must finish it`,
    'completion_gate',
    unknown.length > 0,
  );
}

/**
 * Undoes what the store shows standing, as the compensation plan decides from its records (the same
 * plan as the follow-up's), each under its own key. A notice whose hand-over is unknown is corrected
 * only when the policy or a person's decision allows it; otherwise it is held and the run goes to a
 * person, never ends compensated while the customer may hold an email saying money is coming.
 */
async function compensateStanding(run: RefundRun, refund: RefundReceipt | undefined, resendApprovedAt: string | undefined): Promise<never> {
  const { operationId } = run.ctx;
  for (const step of run.steps.completed()) {
    const { undo } = REFUND_SAGA[step];
    if (undo.kind === 'forward_repair') run.steps.markNotCompensable(step, undo.note);
  }
  const what = refund ? `the provider failed refund ${refund.refundId} after accepting it (${refund.status})` : 'the refund did not go through';
  const records = await pooledActivities<RefundActivities>({ ...BOOKKEEPING, retry: { maximumAttempts: 10 } })
    .standingRecords({ operationId, refundId: refund?.refundId ?? null })
    .then((raw) => standingRecordsSchema.parse(raw))
    .catch((err: unknown) => {
      if (isCancellation(err)) throw err;
      return run.stop('needs_attention', `${what}. What stands could not be read from the store (${(err as Error).message}), so nothing was undone; a person compensates it`, 'completion_gate');
    });
  const plan = compensationPlan(operationId, records, correctsUnknownNotice(run.policy, resendApprovedAt !== undefined));
  for (const { step, key } of plan.undo) await runCompensation(run, step, key, resendApprovedAt, true);
  // A compensation that already ran keeps its record (a correction whose outcome is unknown stays quarantined).
  const held = plan.held && run.steps.hold(plan.held.step, plan.held.key, plan.held.reason) ? plan.held : null;

  const left = run.steps.table().filter((s) => s.compensation?.kind === 'compensation' && s.compensation.status !== 'completed' && s.compensation.status !== 'held');
  if (left.length === 0 && !held) run.stop('compensated', `${what}. The finished steps were compensated in reverse order, each under its own key`, 'completion_gate');
  const unknown = left.filter((s) => s.compensation?.status === 'unknown').map((s) => s.name);
  const open = unknown.length
    ? ` The outcome of ${unknown.join(', ')}'s compensation is unknown: it is quarantined, never retried blind; a person checks it (the step table has its key and Message-ID).`
    : left.length
      ? ' A compensation failed: see the step table; a person must finish it.'
      : '';
  run.stop('needs_attention', `${what}.${open}${held ? ` ${held.reason}` : ''}`, 'completion_gate', unknown.length > 0);
}

/**
 * One registered compensation under `key`, unless it already completed. A correction whose outcome
 * was unknown is resent (same Message-ID) only on a person's approval; `byCertainty` records a
 * failure that may have taken effect as unknown (the review's path).
 */
async function runCompensation(run: RefundRun, step: RefundStep, key: string, resendApprovedAt: string | undefined, byCertainty: boolean): Promise<void> {
  const { undo } = REFUND_SAGA[step];
  if (undo.kind !== 'compensation') return;
  const previous = run.steps.get(step).compensation;
  if (previous?.status === 'completed') return;
  const resend = resendApprovedAt !== undefined && previous?.status === 'unknown' && undo.activity === 'sendRefundCorrection';
  await run.steps.compensate(step, key, undo.boundary, undo.boundary !== 'store', async () => {
    const acts = run.activities(undo.boundary, true) as unknown as Record<typeof undo.activity, (i: unknown) => Promise<unknown>>;
    return acts[undo.activity]({ ...undo.input(run.ctx, key), ...(resend && { resendApprovedAt }) });
  }, byCertainty);
  run.budget.spend({ provider: undo.boundary !== 'store', transportRequests: run.steps.get(step).compensation?.transportRequests ?? 0 });
}

/** The notice's hand-over a person judged, named by its stamp (the store's clock), so that an approved resend covers it and no later one. */
function judgedHandOver(run: RefundRun): { approvedHandOver?: string } {
  const since = run.steps.get('notify_customer').error?.provider?.sendingSince;
  return reviewFixes() && typeof since === 'string' ? { approvedHandOver: since } : {};
}

/** Runs a step; a failure the policy cannot recover from here stops the run with the right verdict. */
async function attempt<T>(run: RefundRun, step: RefundStep, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof StepFailedError)) throw err;
    decideStop(run, step, err.error);
  }
}

/**
 * The verdict for a step that failed for good. Before the point of no return, a refusal the
 * business expects is `rejected` (nothing happened); anything else needs a person, and says what
 * is known of the effect.
 */
function decideStop(run: RefundRun, step: RefundStep, error: StepError): never {
  const rule = decide(run.policy, error.code, error.certainty, REFUND_SAGA[step].boundary);
  const what = `${step} failed with ${error.code} (${error.reason}): ${error.message}`;
  const exhausted = retries(rule) ? ` Retries ran out (${run.steps.get(step).attempts} attempts).` : '';
  const quarantined = rule.action === 'quarantine';
  if (REFUND_SAGA[step].onFailure === 'forward_repair') {
    run.stop('needs_attention', `${what}.${exhausted} Refund ${run.ctx.refund?.refundId} stands and is never sent again; a person must finish ${step}`, step, quarantined);
  }
  if (error.certainty !== 'not_executed') {
    run.effect = { status: 'unknown', certainty: error.certainty, refundId: null };
    run.stop('needs_attention', `${what}. Whether it took effect is unknown: reconcile operation ${run.ctx.operationId} with the provider before any new attempt`, step, quarantined);
  }
  // This attempt had no effect; whether an earlier send did is the operation's record's to say, not this attempt's.
  const recorded = reviewFixes() ? run.recordedEffect() : null;
  if (recorded?.status === 'unknown') {
    run.effect = { status: 'unknown', certainty: 'may_have_executed', refundId: run.effect.refundId };
    run.stop('needs_attention', `${what}.${exhausted} This attempt had no effect, but ${recorded.why}. Reconcile operation ${run.ctx.operationId} with the provider before any new attempt`, step, quarantined);
  }
  const refusal = error.code === 'PERMANENT_BUSINESS' || error.code === 'INVALID_ARGUMENTS';
  if (refusal && rule.action === 'stop') run.stop('rejected', `${what}. Nothing was refunded`, step);
  run.stop('needs_attention', `${what}.${exhausted} Nothing was refunded; a person decides what happens next`, step, quarantined);
}

/** Leaves the run's status, or a decision, beside the operation's evidence in the store; a run that cannot do so still goes on. */
async function audit(
  run: RefundRun,
  status: string,
  reason: string,
  failedStep: RefundStep | null,
  event?: 'run_stopped' | 'run_parked' | 'decision',
  detail?: Record<string, unknown>,
): Promise<void> {
  if (!run.ctx.operationId) return;
  const { recordOutcome } = pooledActivities<RefundActivities>(BOOKKEEPING);
  try {
    await recordOutcome({ operationId: run.ctx.operationId, status, reason, failedStep, ...(event && { event }), ...(detail && { detail }) });
  } catch (err) {
    // The run's own state keeps the verdict; the audit entry is a convenience. A cancellation still propagates.
    if (isCancellation(err)) throw err;
  }
}
