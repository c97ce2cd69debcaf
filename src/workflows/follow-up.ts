// A follow-up run (one per operation, started by the webhook receiver) for a refund the provider reported failed after
// the refund's own run finished: when it did fail, it undoes what of the saga stands, each under the key the saga would
// use (so nothing is undone twice however often the event comes), and leaves its outcome on the operation's audit trail.
import {
  ApplicationFailure,
  CancellationScope,
  patched,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { RefundActivities } from '../activities';
import { compensationPlan, correctsUnknownNotice } from '../compensations/plan';
import { type Compensation, REFUND_SAGA, REFUND_STEPS } from '../compensations/registry';
import {
  CHECKOUT_REFUND_SCOPE,
  evidenced,
  followUpFactsSchema,
  followUpQuery,
  providerEventSchema,
  providerEventSignal,
  SEARCH_ATTRIBUTES,
  type FollowUpCompensation,
  type FollowUpFacts,
  type FollowUpInput,
  type FollowUpResult,
  type FollowUpState,
} from '../contract';
import { z } from 'zod';
import { activityOptions } from '../saga/workflow/activity-options';
import { audit } from '../saga/workflow/audit';
import { StepRunner } from '../saga/workflow/step-runner';
import { undoSteps } from '../saga/workflow/undo';
import type { Boundary } from '../reliability/taxonomy';
import { IgnoredMessages, refusePlaintext, setQueryHandler, setSignalHandler } from '../saga/workflow/messages';
import { pooledActivities } from './pools';
import { MAX_PROVIDER_EVENTS } from './refund/provider-news';
import { describeFailure } from '../saga/workflow/step-failure';

const inputSchema = z.object({
  operationId: z.string().min(1).max(200),
  refundId: z.string().min(1).max(255),
  originalWorkflowId: z.string().min(1).max(1000),
});
const LOOKUP = {
  startToCloseTimeout: '30s',
  scheduleToCloseTimeout: '10m',
  retry: { initialInterval: '1s', maximumInterval: '30s' },
} as const;

export async function followUpWorkflow(input: FollowUpInput): Promise<FollowUpResult> {
  refusePlaintext(input);
  if (!inputSchema.safeParse(input).success)
    throw ApplicationFailure.nonRetryable(
      'a follow-up needs an operationId, a refundId and the originalWorkflowId',
      'INVALID_ARGUMENTS',
    );
  const { operationId, refundId, originalWorkflowId } = input;
  const { workflowId, runId } = workflowInfo();
  // Follow-ups begun before it could be cancelled part-way through their compensations, and still replay so.
  const compensatesThroughCancel = patched('follow-up-compensates-through-cancel');
  const ignored = new IgnoredMessages();
  const state: FollowUpState = {
    input,
    status: 'reconciling',
    providerEvents: [],
    ignoredMessages: ignored.view,
    compensations: [],
    reason: null,
  };
  setQueryHandler(followUpQuery, () => state);
  // The events are kept for operators only (nothing here acts on them): parsing them changes no command, so no patch.
  setSignalHandler(
    providerEventSignal,
    providerEventSchema,
    (e) => {
      if (e.refundId !== refundId) return `names refund ${e.refundId}, not this run's refund ${refundId}`;
      if (!state.providerEvents.some((x) => x.id === e.id) && state.providerEvents.length < MAX_PROVIDER_EVENTS)
        state.providerEvents.push(e);
      return undefined;
    },
    ignored,
  );
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: 'reconciling' },
    { key: SEARCH_ATTRIBUTES.step, value: 'follow_up' },
    { key: SEARCH_ATTRIBUTES.followUpOf, value: originalWorkflowId },
  ]);

  const finish = async (
    status: FollowUpResult['status'],
    reason: string,
    facts: FollowUpFacts | null = null,
  ): Promise<FollowUpResult> => {
    Object.assign(state, { status, reason });
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.status, value: status },
      { key: SEARCH_ATTRIBUTES.needsAttention, value: status === 'needs_attention' },
      ...(facts ? [{ key: SEARCH_ATTRIBUTES.effect, value: facts.failed ? 'failed' : 'refunded' }] : []),
    ]);
    const done = state.compensations.map(({ step, key, status: s }) => ({ step, key, status: s }));
    const detail = { followUp: workflowId, runId, originalWorkflowId, compensations: done };
    // Best effort, a cancellation too: the result carries the outcome.
    await audit(input, status, reason, null, 'follow_up', detail).catch(() => undefined);
    const refund = facts && { refundId: facts.refund.refundId, status: facts.refund.status };
    return { workflowId, operationId, originalWorkflowId, status, reason, refund, compensations: state.compensations };
  };

  let raw: unknown;
  try {
    raw = await pooledActivities<RefundActivities>(LOOKUP).examineFollowUp({ operationId, refundId });
  } catch (err) {
    const { error } = describeFailure(err, 'stripe', 'examining the failure the provider reported', false);
    return finish(
      'needs_attention',
      `the provider could not be asked about refund ${refundId}: ${error.code}: ${error.message}; a person checks it`,
    );
  }
  const examined = evidenced(followUpFactsSchema).safeParse(raw);
  if (!examined.success)
    return finish(
      'needs_attention',
      `examining refund ${refundId} returned a result the follow-up cannot use; a person checks it`,
    );
  const facts = examined.data as unknown as FollowUpFacts;
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.orderId, value: facts.request.orderId }]);
  if (!facts.failed)
    return finish(
      'unchanged',
      `refund ${facts.refund.refundId} is ${facts.refund.status} at the provider: nothing to undo`,
      facts,
    );

  // A checkout's refund of its charge undid that checkout, which has ended: nothing of a refund saga stands to undo.
  if (facts.scope === CHECKOUT_REFUND_SCOPE)
    return finish(
      'needs_attention',
      `the provider ${facts.refund.status} refund ${facts.refund.refundId}, which gave back checkout ${facts.request.orderId}'s charge, after ${originalWorkflowId} finished: the customer paid and was not refunded; a person refunds them or tells them`,
      facts,
    );

  const compensate = async (): Promise<FollowUpResult> => {
    state.status = 'compensating';
    upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.status, value: 'compensating' }]);
    // The run's own plan: what the store shows standing. The follow-up takes no decisions: a person sends a correction.
    const plan = compensationPlan(
      operationId,
      facts,
      correctsUnknownNotice(facts.policy, false),
      'a person sends the customer a correction',
    );
    const ctx = {
      orderId: facts.request.orderId,
      operationId,
      refund: facts.refund,
      correctionReason: facts.refund.status === 'canceled' ? 'refund_canceled' : 'refund_failed',
    } as const;
    const planned = plan.undo.map(({ step, key }) => {
      const undo = REFUND_SAGA[step].undo as Compensation;
      return { step, key, undo, input: undo.input(ctx, key) };
    });
    const steps = new StepRunner(REFUND_STEPS);
    // Held to nothing but the policy's own timeouts and retries: the follow-up has no budget.
    const activities = (boundary: Boundary) =>
      pooledActivities<RefundActivities>(activityOptions(facts.policy, boundary));
    await undoSteps({ steps, budget: { spend: () => undefined }, calls: { activities } }, planned);
    state.compensations = planned.map(({ step, key }) => {
      const { status, output, error } = steps.get(step).compensation!;
      return { step, key, status: status as FollowUpCompensation['status'], output, error };
    });

    const what = `the provider ${facts.refund.status === 'canceled' ? 'canceled' : 'failed'} refund ${facts.refund.refundId} after ${originalWorkflowId} finished`;
    const open = state.compensations.filter((c) => c.status !== 'completed');
    // A notice never handed over (pending) told the customer nothing; one whose hand-over is unknown (sending) may have.
    const unsure = plan.held ? ` ${plan.held.reason}.` : '';
    if (open.length > 0)
      return finish(
        'needs_attention',
        `${what}. ${open.map((c) => `${c.step}'s compensation ${c.status} (key ${c.key})`).join('; ')}: a person finishes it.${unsure}`,
        facts,
      );
    if (unsure) return finish('needs_attention', `${what}.${unsure}`, facts);
    const done = state.compensations.map((c) => `${c.step} (key ${c.key})`).join(', ');
    return finish(
      'compensated',
      `${what}. ${done ? `Compensated: ${done}` : 'Nothing of the saga stood, so nothing was undone'}`,
      facts,
    );
  };
  // Compensations never stop for a cancellation: the order and the customer are put right, and the outcome recorded.
  return compensatesThroughCancel ? CancellationScope.nonCancellable(compensate) : compensate();
}
