// The refund workflow: the saga (saga.ts) run until it completes, or stops. A stop that needs a
// person parks the run, which waits for a decision (the `decide` Update) or for the provider's word
// that its refund failed, then goes on from where the decision says. Deterministic: every effect
// happens in an activity; every failure is decided by the recovery policy; an unknown outcome is
// reconciled with the provider, never resent blind.
import {
  CancellationScope,
  condition,
  isCancellation,
  metricMeter,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { RefundActivities } from '../../activities';
import {
  type CompletedRefund,
  decisionUpdate,
  providerEventSchema,
  providerEventSignal,
  type RefundResult,
  type RefundStep,
  stepsQuery,
} from '../../contract';
import { parseRefundRequest, type RefundRequestInput } from '../../domain/refund-request';
import { refundMetrics } from '../../observability/metrics';
import { BOOKKEEPING } from '../../saga/workflow/activity-options';
import { failingTheUpdateOnly, refusePlaintext, setQueryHandler, setSignalHandler } from '../../saga/workflow/messages';
import { pooledActivities } from '../pools';
import { StepFailedError } from '../../saga/workflow/step-failure';
import { compensate } from './compensation';
import type { Chosen } from '../../saga/workflow/desk';
import { audit, cancelled, ended, handOverToFollowUp } from './endings';
import { lookAgain, partialRefund } from './refund-effect';
import { RefundRun } from './run';
import { RunStopped } from '../../saga/workflow/run-stopped';
import { carryOut } from './saga';
import { confirmDelivered } from './steps';
import * as reasons from './stop-reasons';
import { showRejectedInput } from './visibility';

export async function refundWorkflow(input: RefundRequestInput): Promise<RefundResult> {
  // Not a rejected request but a caller to redirect: Failed, its reason readable without the codec, nothing ran.
  refusePlaintext(input);
  let run: RefundRun;
  // The workflow's meter records nothing on replay: a run is counted once, however often it is replayed.
  refundMetrics(metricMeter).runStarted();
  try {
    run = new RefundRun(parseRefundRequest(input));
  } catch (err) {
    return rejectedInput(input, (err as Error).message);
  }
  setQueryHandler(stepsQuery, () => run.view());
  // A malformed message is ignored or refused, never a failed workflow task.
  setSignalHandler(
    providerEventSignal,
    providerEventSchema,
    (event) => run.news.record(event, run.ctx.refund?.refundId ?? run.effect.refundId),
    run.ignored,
  );
  setHandler(
    decisionUpdate,
    (decision) =>
      failingTheUpdateOnly('the decision', () => {
        const record = run.desk.apply(decision);
        run.noteDecision();
        return record;
      }),
    {
      validator: (decision) => {
        refusePlaintext(decision);
        run.desk.validate(decision);
      },
    },
  );

  // The one place a run's cancellation is handled: wherever it lands (a step, a park's bookkeeping, a wait, a
  // decision's audit), the run ends with its word, compensates what it can and hands unacted news to the follow-up.
  try {
    return await drive(run);
  } catch (err) {
    if (isCancellation(err) && (!run.inBookkeeping || run.cancelsAnywhere())) {
      run.desk.close('it is being cancelled');
      await CancellationScope.nonCancellable(() => cancelled(run));
    }
    throw err;
  }
}

/** The saga until it completes or ends, parking for a person between; a cancellation passes through untouched. */
async function drive(run: RefundRun): Promise<RefundResult> {
  let next = () => carryOut(run, 'load_order');
  for (;;) {
    let stopped: RunStopped<RefundStep>;
    run.inBookkeeping = false;
    try {
      const result = await next();
      run.finish('completed', 'every check of the completion gate passed', null);
      refundMetrics(metricMeter).runEnded('completed');
      await handOverToFollowUp(run);
      return result;
    } catch (err) {
      if (isCancellation(err)) throw err;
      // A step failure no branch decided on still stops the run with its reason, never fails its workflow task forever.
      stopped =
        err instanceof StepFailedError
          ? new RunStopped<RefundStep>('needs_attention', reasons.undecidedFailure(err.step, err.error), null)
          : (err as RunStopped<RefundStep>);
      if (!(stopped instanceof RunStopped)) throw err;
    }
    run.inBookkeeping = true;
    if (stopped.status !== 'needs_attention') return ended(run, stopped.status, stopped.reason, stopped.failedStep);

    const chosen = await parkUntilDecided(run, stopped);
    if (chosen === 'provider_failed') {
      const event = run.unactedFailure()!;
      run.news.checkedFailures.add(event.id);
      await audit(run, 'running', reasons.providerSaysFailed(event), stopped.failedStep, 'decision', {
        decision: 'provider_event',
        by: 'provider',
        eventId: event.id,
      });
      run.unpark();
      next = () => carryOut(run, 'completion_gate');
      continue;
    }
    const { record } = chosen;
    const approval = run.desk.records.find((r) => r.answers === record.seq && r.decision === 'approve');
    await audit(run, chosen.kind, record.reason, stopped.failedStep, 'decision', {
      decision: record.decision,
      by: record.by,
      seq: record.seq,
      // Who signed, by key: a name alone proves nothing (null: unsigned, for reconcile or DECISIONS_UNSIGNED=allow).
      keyId: record.keyId ?? null,
      ...(approval && {
        approvedBy: approval.by,
        approvalReason: approval.reason,
        approvedByKeyId: approval.keyId ?? null,
      }),
    });
    if (chosen.kind === 'abandon')
      return ended(run, 'abandoned', reasons.abandoned(record.by, record.reason), stopped.failedStep);
    if (chosen.kind === 'expired') {
      // Stopped is the safe default, never proceeding; what the run leaves unsettled still waits for a person.
      const result = await ended(
        run,
        'stopped',
        reasons.approvalExpired(record.decision, record.by, record.expiresAt),
        stopped.failedStep,
      );
      if (run.leavesWorkBehind()) run.flagForAttention();
      return result;
    }
    run.unpark();
    next = resumeAsDecided(run, chosen);
  }
}

/** Refused before anything ran: a result, still findable as rejected. */
function rejectedInput(input: RefundRequestInput, reason: string): RefundResult {
  const orderId = (input as { orderId?: unknown } | null)?.orderId;
  const validOrderId = typeof orderId === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(orderId) ? orderId : null;
  showRejectedInput(validOrderId, reason);
  refundMetrics(metricMeter).runEnded('rejected');
  return {
    workflowId: workflowInfo().workflowId,
    orderId: validOrderId,
    operationId: null,
    status: 'rejected',
    reason,
    failedStep: null,
  };
}

/**
 * Parks the run and waits for a decision, or for the provider's word that the refund failed, which
 * is not a decision to wait for: the registry compensates that without asking.
 */
async function parkUntilDecided(
  run: RefundRun,
  stopped: RunStopped<RefundStep>,
): Promise<Chosen<RefundStep> | 'provider_failed'> {
  // Who may decide is read as the workers are configured now, also for a run that never loaded its settings; a
  // worker that cannot say leaves the run's own policy in force, and a cancellation goes on to the run's handler.
  await pooledActivities<RefundActivities>(BOOKKEEPING)
    .decisionPolicy()
    .then(
      (decisions) => run.useDecisionPolicy(decisions),
      (err: unknown) => {
        if (isCancellation(err) && run.cancelsAnywhere()) throw err;
      },
    );
  run.park(stopped);
  refundMetrics(metricMeter).runParked(run.parked!.verdict);
  await audit(run, 'needs_attention', stopped.reason, stopped.failedStep, 'run_parked', {
    verdict: run.parked?.verdict,
  });
  const news = () =>
    !run.desk.awaitingApproval && run.ctx.refund !== undefined && run.news.uncheckedFailure(run.effect) !== undefined;
  run.inBookkeeping = false;
  const chosen = await Promise.race([run.desk.next(), condition(news).then(() => 'provider_failed' as const)]);
  run.inBookkeeping = true;
  // A decide Update and the failure in one workflow task: the race may pick either, the decision must win.
  return run.desk.firstOf(chosen);
}

/** What the run carries out for a person's decision. */
function resumeAsDecided(
  run: RefundRun,
  chosen: Exclude<Chosen<RefundStep>, { kind: 'abandon' | 'expired' }>,
): () => Promise<CompletedRefund> {
  // A resend a person approved covers the hand-over they judged, which began before their decision, and no later one.
  const resendApprovedAt = chosen.record.at;
  switch (chosen.kind) {
    case 'compensate':
      return () => compensate(run, { resendApprovedAt });
    case 'reconcile':
      return () => lookAgain(run, false).then((from) => carryOut(run, from));
    case 'confirm-delivered':
      return () => confirmDelivered(run, chosen.record).then(() => carryOut(run, 'completion_gate'));
    case 'retry-step': {
      const { step } = chosen;
      const { refund, partialNote } = run.ctx;
      // A partial refund keeps its email frozen: retrying only repairs the order to what was refunded.
      if (run.effect.status === 'partial' && refund && partialNote !== undefined)
        return () => partialRefund(run, refund, partialNote);
      // A person's retry of the refund looks it up at the provider first: one that exists is never sent again.
      if (step === 'create_refund') return () => lookAgain(run, true).then((from) => carryOut(run, from));
      // A notice whose hand-over ended unknown is sent again only on a person's decision, with the same Message-ID.
      const resend = step === 'notify_customer' && run.steps.get('notify_customer').error?.code === 'UNKNOWN_OUTCOME';
      return () => carryOut(run, step, resend ? { resendApprovedAt } : {});
    }
  }
}
