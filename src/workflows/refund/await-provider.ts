// The completion gate, and awaiting a refund the provider has not settled: woken by its webhook, polled with the
// policy's backoff, parked for a person past the policy's deadline. A webhook that says succeeded stands for the
// receipt; one that says failed is confirmed first. Events count by how far along they put the refund, so
// duplicates and events out of order change nothing twice.
import { condition } from '@temporalio/workflow';
import type { CheckCompletionInput } from '../../activities/completion-gate';
import { REFUND_SAGA } from '../../compensations/registry';
import {
  type AwaitingProvider,
  type CompletedRefund,
  type GateResult,
  type RefundReceipt,
  stepKey,
} from '../../contract';
import { lifecycleRank } from '../../domain/order';
import { furthestEvent } from './provider-news';
import { Stopped } from '../../saga/workflow/run-stopped';
import { awaitProvider, conditionTimeout, nextLook } from '../../saga/workflow/wait';
import { compensate } from './compensation';
import type { RefundRun } from './run';
import { awaitingWebhook, gateMismatch, providerDeadline } from './stop-reasons';

/** The completion gate, waiting while the provider has not settled the run's refund; the run's result once every check passed. */
export async function completionGate(run: RefundRun): Promise<CompletedRefund | Stopped<'completion_gate'>> {
  run.atGate = true;
  const { request, ctx, workflowId, operationId } = run;
  const refund = ctx.refund!;
  const input = gateInput(run, refund);
  const settings = awaitProvider(run.policy);
  // A person's retry-step after the deadline waits afresh.
  run.awaitingProvider = null;
  /** Events already acted on: each wakes the run once. */
  const seen = new Set<string>();
  const news = () => {
    const e = furthestEvent(run.news.events, input.refundId);
    return e && lifecycleRank(e.refundStatus) > 0 && !seen.has(e.id) ? e : undefined;
  };
  let gate = await checkGate(run, input);
  for (;;) {
    const waited = run.awaitingProvider;
    if (gate.verdict === 'pass') {
      // A failure reported while the gate looked is the provider's word against its own receipt: asked once more.
      const failure = news();
      if (failure && lifecycleRank(failure.refundStatus) === 2) {
        seen.add(failure.id);
        gate = await checkGate(run, input);
        continue;
      }
      if (waited) run.budget.renew(Date.now());
      const [order, notification] = [ctx.orderReceipt!, ctx.notice!];
      return { workflowId, orderId: request.orderId, operationId, status: 'completed', refund, order, notification };
    }
    if (gate.verdict === 'refund_failed') {
      if (waited) run.budget.renew(Date.now());
      return compensate(run, { refund: gate.refund });
    }
    if (gate.verdict === 'mismatch') return new Stopped('needs_attention', gateMismatch(gate), 'completion_gate');
    const awaiting = waited ?? startAwaiting(run, input.refundId, settings.deadlineMs);
    const until = Date.parse(awaiting.until);
    if (Date.now() >= until) {
      awaiting.settledBy = { kind: 'deadline' };
      return new Stopped(
        'needs_attention',
        providerDeadline(gate.refund, awaiting.since, awaiting.until, awaiting.polls),
        'completion_gate',
      );
    }
    const wait = conditionTimeout(nextLook(settings, awaiting.polls + 1, until));
    run.steps.await(
      'completion_gate',
      awaitingWebhook({ refundId: input.refundId, status: gate.refund.status }, awaiting.until, wait),
    );
    await condition(() => news() !== undefined, wait);
    const event = news();
    if (event) seen.add(event.id);
    else awaiting.polls += 1;
    gate = await checkGate(run, input, event?.refundStatus === 'succeeded' ? event.id : undefined);
    if (gate.verdict !== 'pending')
      awaiting.settledBy = event ? { kind: 'webhook', eventId: event.id } : { kind: 'poll' };
  }
}

/** What the gate checks of the run's refund: the same whether its first look rides in the notice's activity or not. */
export function gateInput(run: RefundRun, refund: RefundReceipt): CheckCompletionInput {
  const { request, operationId } = run;
  return {
    operationId,
    orderId: request.orderId,
    paymentIntentId: run.begin!.order.paymentIntentId,
    refundId: refund.refundId,
    amount: request.amount,
    currency: request.currency,
    noticeKey: stepKey(operationId, 'notify_customer'),
    idempotencyKey: stepKey(operationId, 'create_refund'),
  };
}

/** From the first pending answer: visible as awaiting_provider, held to the policy's deadline rather than the run's. */
function startAwaiting(run: RefundRun, refundId: string, deadlineMs: number): AwaitingProvider {
  const since = Date.now();
  const awaiting: AwaitingProvider = {
    refundId,
    since: new Date(since).toISOString(),
    until: new Date(since + deadlineMs).toISOString(),
    polls: 0,
    settledBy: null,
  };
  run.awaitingProvider = awaiting;
  run.budget.holdUntil(since + deadlineMs + run.policy.timeouts.stripe.scheduleToCloseMs);
  run.setStatus('awaiting_provider', 'completion_gate');
  return awaiting;
}

/**
 * One look by the gate. The first is held to the run's budget like any provider call (a run that
 * spent it asks a person); while the run awaits the provider, its reads are held only to the wait's deadline.
 */
async function checkGate(run: RefundRun, input: CheckCompletionInput, providerEventId?: string): Promise<GateResult> {
  const checked = { ...input, ...(providerEventId && { providerEventId }) };
  const gate = await run.calls.step(REFUND_SAGA.completion_gate, checked, { essential: run.awaitingProvider !== null });
  if (run.status === 'awaiting_provider' && gate.verdict !== 'pending') run.setStatus('running', 'completion_gate');
  return gate;
}
