// What a follow-up run needs of a refund reported failed after its run finished: the provider's word on it now (a
// webhook is the reason to look, never the evidence for undoing), and which of the saga's effects stand in the store.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type Stripe from 'stripe';
import { compensationKeyOf } from '../compensations/plan';
import {
  lookupKey,
  stepKey,
  type Evidenced,
  type FollowUpFacts,
  type ProviderEventSummary,
  type RunSettings,
  type StandingRecords,
} from '../contract';
import { Classified, stepCall } from './attempt';
import { noIntent } from './create-refund';
import type { StripeDeps } from './stripe-client';
import { paymentFailure } from './stripe-failures';
import { listRefunds, providerFailed, refundIdsOf, settleProviderFailure, toReceipt } from './stripe-refunds';
import { startFollowUp } from '../temporal/client';

export function createFollowUpActivities(deps: StripeDeps & { settings: RunSettings; temporal?: Client }) {
  const { store } = deps;

  /** Reads the refund the provider's event named, settles the operation failed if it failed (or was canceled), and reports what stands. */
  async function examineFollowUp(input: { operationId: string; refundId: string }): Promise<Evidenced<FollowUpFacts>> {
    const key = lookupKey(stepKey(input.operationId, 'create_refund'), 'follow-up');
    const call = stepCall('follow_up', { ...input, key }, 'stripe');
    return deps.attempt(call, paymentFailure(false), async (attempt) => {
      const stripe = deps.stripe(attempt);
      const op = await store.operations.get(input.operationId);
      if (!op) throw noIntent(input.operationId);
      const refund = await stripe.refunds.retrieve(input.refundId);
      if (refund.metadata?.operation_id !== input.operationId) {
        const message = `refund ${refund.id} does not carry operation ${input.operationId}`;
        throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'not_this_operation', message);
      }
      // Only the operation's own refund failing undoes its saga; another refund carrying its id is an anomaly for a person.
      if (op.refund?.refundId !== refund.id) {
        const message = `refund ${refund.id} (${refund.status}) carries operation ${input.operationId}, whose refund is ${op.refund?.refundId ?? 'not recorded'}: nothing is undone; a person looks at why it exists`;
        throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'not_this_refund', message);
      }
      const receipt = toReceipt(refund, false);
      const failed = providerFailed(refund);
      if (failed) {
        await refuseAnotherRefund(stripe, input.operationId, op.request.orderId, refund.id);
        const at = { operationId: input.operationId, actor: attempt.actor, event: 'refund_failed_after_completion' };
        await settleProviderFailure(store.operations, refund, receipt, { ...at, detail: { followUp: attempt.actor } });
      }
      return {
        request: op.request,
        refund: receipt,
        failed,
        ...(await standingRecords({ operationId: input.operationId, refundId: refund.id })),
        policy: deps.settings.policy,
        scope: op.scope,
      };
    });
  }

  /** Another refund carrying the operation id, as the gate would find it: its failure undoes nothing, a person looks (the gate's anomaly). */
  async function refuseAnotherRefund(stripe: Stripe, operationId: string, orderId: string, refundId: string) {
    const order = await store.getOrder(orderId);
    if (!order) return;
    const listed = await listRefunds(stripe, order.paymentIntentId);
    const others = refundIdsOf(listed, operationId).filter((id) => id !== refundId);
    if (others.length === 0) return;
    const message = `refund ${refundId} failed, but ${others.join(', ')} also carr${others.length === 1 ? 'ies' : 'y'} operation ${operationId}: nothing is undone; a person looks at why it exists`;
    throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'more_than_one_refund', message);
  }

  /** What of the saga stands (a read): the order's refund if it is `refundId` (null: any), the notice and its correction. */
  async function standingRecords(input: { operationId: string; refundId: string | null }): Promise<StandingRecords> {
    const { operationId, refundId } = input;
    const applied = await store.appliedRefund(operationId);
    const entry = async (key: string) => {
      const found = await store.getNotification(key);
      return found ? { key: found.key, status: found.status, messageId: found.messageId } : null;
    };
    return {
      order:
        applied && (refundId === null || applied.refundId === refundId)
          ? { refundId: applied.refundId, amount: applied.amount, revertedByKey: applied.revertedByKey }
          : null,
      notice: await entry(stepKey(operationId, 'notify_customer')),
      correction: await entry(compensationKeyOf('notify_customer', operationId)),
    };
  }

  /** A run ending with the provider's word that its refund failed, not acted on (parked, abandoned): a follow-up takes it. */
  async function handToFollowUp(input: {
    operationId: string;
    event: ProviderEventSummary;
    workflowTaskQueue?: string;
  }): Promise<{ workflowId: string; runId: string }> {
    if (!deps.temporal)
      throw ApplicationFailure.nonRetryable('this worker has no Temporal client for follow-ups', 'INVALID_ARGUMENTS');
    const { workflowExecution, taskQueue } = Context.current().info;
    const workflowId = workflowExecution?.workflowId ?? 'activity';
    // The follow-up runs where the handing run's workflows run: this activity's own queue may be an activity pool's, which no workflow worker polls.
    const started = await startFollowUp(deps.temporal, {
      operationId: input.operationId,
      originalWorkflowId: workflowId,
      event: input.event,
      taskQueue: input.workflowTaskQueue ?? taskQueue,
    });
    const { id: eventId, type, refundId, refundStatus } = input.event;
    const detail = { eventId, type, refundId, refundStatus, followUp: started };
    await store.operations.audit(input.operationId, workflowId, 'late_provider_event', detail);
    return started;
  }

  return { examineFollowUp, standingRecords, handToFollowUp };
}
