// The refund saga, top to bottom: load the order and commit the operation's intent → settle earlier
// operations → create the refund (Stripe) → record it on the order → tell the customer → the
// completion gate. The harness runs it: a stop parks it for a person, a decision runs it again
// (finished steps keep their outputs), a cancellation compensates what it can.
import { z } from 'zod';
import { REFUND_SAGA } from '../../compensations/registry';
import {
  providerEventSchema,
  providerEventSignal,
  type RefundResult,
  type RefundRunState,
  type RefundStep,
  stepsQuery,
} from '../../contract';
import { parseRefundRequest, type RefundRequestInput } from '../../domain/refund-request';
import type { Resumed } from '../../saga/workflow/desk';
import { keyField, runSaga, type Saga } from '../../saga/workflow/harness';
import { setSignalHandler } from '../../saga/workflow/messages';
import { isStopped } from '../../saga/workflow/run-stopped';
import { completionGate, gateInput } from './await-provider';
import { compensate } from './compensation';
import { cancelled, handOverToFollowUp } from './endings';
import { settleEarlier } from './fence';
import { lookAgain, partialRefund, sendRefund } from './refund-effect';
import { RefundRun } from './run';
import { confirmDelivered, loadOrder, notice, orderUpdate } from './steps';
import { providerSaysFailed } from './stop-reasons';

export async function refundWorkflow(input: RefundRequestInput): Promise<RefundResult> {
  return runSaga(REFUND, input);
}

async function refund(run: RefundRun, resumed: Resumed<RefundStep> | null) {
  const { ctx } = run;
  const begin = run.begin ?? (await loadOrder(run));
  if (isStopped(begin)) return begin;
  if (!ctx.refund) {
    const earlier = await settleEarlier(run, begin);
    if (earlier) return earlier;
    const refund = await sendRefund(run, begin);
    if (isStopped(refund)) return refund;
    ctx.refund = refund;
  }
  // Gone to the gate (on the provider's word that the refund failed), the run never comes back to the steps before it.
  if (!run.atGate) {
    ctx.orderReceipt ??= await run.calls.step(REFUND_SAGA.update_order, orderUpdate(run, ctx.refund));
    // A notice whose hand-over ended unknown is sent again only on a person's retry, with the same Message-ID. The
    // gate's first look may ride in its activity, once the notice is recorded sent.
    const readFirst = { step: REFUND_SAGA.completion_gate, input: gateInput(run, ctx.refund) };
    ctx.notice ??= await run.calls.step(REFUND_SAGA.notify_customer, notice(run, ctx.refund, resumed), { readFirst });
  }
  return completionGate(run);
}

const REFUND: Saga<RefundStep, RefundRunState, RefundRun, RefundResult> = {
  stateQuery: stepsQuery,
  start: (input) => new RefundRun(parseRefundRequest(input as RefundRequestInput)),
  key: keyField('orderId', z.string().regex(/^[A-Za-z0-9_-]{1,64}$/)),
  // A malformed message is ignored or refused, never a failed workflow task.
  handlers: (run) =>
    setSignalHandler(
      providerEventSignal,
      providerEventSchema,
      (event) => run.news.record(event, run.ctx.refund?.refundId ?? run.effect.refundId),
      run.ignored,
    ),
  body: refund,
  stepFailed: (run, step, error) => run.stopFor(step, error),
  async prepare(run, chosen) {
    // A resend a person approved covers the hand-over they judged, which began before their decision, and no later one.
    if (chosen.kind === 'compensate') return compensate(run, { resendApprovedAt: chosen.record.at });
    if (chosen.kind === 'reconcile') return lookAgain(run, false);
    if (chosen.kind === 'confirm-delivered') return confirmDelivered(run, chosen.record);
    const { refund, partialNote } = run.ctx;
    // A partial refund keeps its email frozen: retrying only repairs the order to what was refunded.
    if (run.effect.status === 'partial' && refund && partialNote !== undefined)
      return partialRefund(run, refund, partialNote);
    // A person's retry of the refund looks it up at the provider first: one that exists is never sent again.
    if (chosen.step === 'create_refund') return lookAgain(run, true);
    if (chosen.step === 'load_order') run.begin = null;
  },
  // The provider's word that the refund failed is not a decision to wait for: the gate asks it, and what it confirms is compensated.
  news(run) {
    if (run.ctx.refund === undefined || !run.news.uncheckedFailure()) return undefined;
    return () => {
      const event = run.news.unactedFailure()!;
      run.news.checkedFailures.add(event.id);
      const detail = { decision: 'provider_event', by: 'provider', eventId: event.id };
      return { reason: providerSaysFailed(event), detail, resume: () => completionGate(run) };
    };
  },
  afterEnd: handOverToFollowUp,
  cancelled,
};
