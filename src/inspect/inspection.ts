// One refund run, inspected: its state (the step table, by Query), its history (decisions, how it
// ended) and the external evidence, turned into observed facts, inferences that say how sure they
// are, and exactly one verdict with the single smallest next action and who may take it.
import type { Client, WorkflowHandle } from '@temporalio/client';
import {
  decodeFromPayloadsAtIndex,
  decodeOptionalFailureToOptionalError,
} from '@temporalio/common/lib/internal-non-workflow';
import { workerPolling } from '../temporal/client';
import { REFUND_SAGA } from '../compensations/registry';
import {
  CHECKOUT_WORKFLOW,
  checkoutOperationId,
  type CheckoutRunState,
  decisionAddress,
  FOLLOW_UP_WORKFLOW,
  operationId as operationIdOf,
  parseFollowUpWorkflowId,
  parseRefundWorkflowId,
  SEARCH_ATTRIBUTES,
  stepsQuery,
  type RefundResult,
  type RefundRunState,
  type RefundWorkflow,
} from '../contract';
import { type Inference, verdict } from '../reliability/verdict';
import { checkoutFacts } from './checkout-facts';
import { gatherEvidence, type EvidenceSources, type Fact } from './facts';
import { infer } from './inferences';

export type Inspection = Awaited<ReturnType<typeof inspectRun>>;

export async function inspectRun(client: Client, sources: EvidenceSources, scope: string, workflowId: string) {
  const handle = client.workflow.getHandle<RefundWorkflow>(workflowId);
  const described = await handle.describe();
  const sa = described.typedSearchAttributes;
  const execution = described.status.name;
  const history = await readHistory(client, handle);
  let state: RefundRunState | null = null;
  let stateUnavailable: string | null = null;
  // A follow-up run (a refund that failed after its run finished) has no step table: its result names its compensations.
  const followUpRun = described.type === FOLLOW_UP_WORKFLOW;
  if (followUpRun)
    stateUnavailable = `a follow-up run of ${sa.get(SEARCH_ATTRIBUTES.followUpOf) ?? 'an earlier run'}: no step table; its compensations are in its result`;
  // A Query needs a worker on the run's queue, even for a closed run: without one it would wait, so ask only when one polls.
  else if (!(await workerPolling(client, described.taskQueue)))
    stateUnavailable =
      'no worker is polling, so the run cannot be queried for its step table; start one with `npm start`';
  else {
    state = await handle.query(stepsQuery).catch((err: Error) => {
      stateUnavailable = `the steps Query failed: ${err.message}`;
      return null;
    });
  }
  const result = history.result;
  const run = {
    workflowId,
    runId: described.runId,
    execution,
    startedAt: described.startTime.toISOString(),
    closedAt: described.closeTime?.toISOString() ?? null,
    steps: state?.steps ?? null,
    stateUnavailable,
    outcome: state?.outcome ?? null,
    decisions: state?.decisions ?? [],
    address: execution === 'RUNNING' && state?.parked ? decisionAddress(state) : null,
  };
  const ran = [
    {
      id: `temporal:${workflowId}`,
      says: `${execution}${sa.get(SEARCH_ATTRIBUTES.status) ? `, RefundStatus ${sa.get(SEARCH_ATTRIBUTES.status)}` : ''}; ${described.historyLength} history events`,
    },
    ...history.facts,
  ];
  const judge = (orderId: string | null, version: number | undefined, inferences: Inference[], more = {}) =>
    verdict({
      execution,
      state,
      result,
      failure: history.failure,
      inferences,
      parkedVerdict: sa.get(SEARCH_ATTRIBUTES.verdict) ?? null,
      orderId,
      version,
      ...more,
    });

  if (described.type === CHECKOUT_WORKFLOW) {
    // A checkout run: its cart's evidence (checkout-facts.ts) and the verdict of its state; no refund inferences.
    const cartId =
      (state as unknown as CheckoutRunState | null)?.request.cartId ?? sa.get(SEARCH_ATTRIBUTES.orderId) ?? null;
    const ev = cartId
      ? await checkoutFacts(sources, cartId)
      : { facts: [], unavailable: ['evidence: the run names no cart'] };
    return {
      ...run,
      refundStatus: state?.status ?? null,
      orderId: cartId,
      operationId: cartId && checkoutOperationId(cartId),
      escalation: null,
      facts: [...ran, ...ev.facts],
      inferences: [],
      unavailable: [...ev.unavailable, ...(stateUnavailable ? [stateUnavailable] : [])],
      ...judge(cartId, undefined, [], { parkedVerdict: state?.parked?.verdict ?? null }),
    };
  }
  const orderId = state?.request.orderId ?? sa.get(SEARCH_ATTRIBUTES.orderId) ?? result?.orderId ?? null;
  const version = parseRefundWorkflowId(workflowId)?.operationVersion;
  const operationId =
    state?.operation?.operationId ??
    result?.operationId ??
    (followUpRun
      ? (parseFollowUpWorkflowId(workflowId)?.operationId ?? null)
      : orderId && version
        ? operationIdOf(scope, orderId, version)
        : null);
  const ev = orderId && operationId ? await gatherEvidence(sources, operationId, orderId) : null;
  const inferences = ev ? infer(state, result, ev) : [];
  const unavailable = [
    ...(ev?.unavailable ?? (orderId ? [] : ['evidence: the run names no order, so there is nothing to look up'])),
    ...(stateUnavailable ? [stateUnavailable] : []),
  ];
  const failedLater = !followUpRun && ev?.operation?.status === 'failed' && result?.status === 'completed';
  return {
    ...run,
    refundStatus: state?.status ?? sa.get(SEARCH_ATTRIBUTES.status) ?? null,
    orderId,
    operationId,
    escalation: state?.outcome?.failedStep ? (REFUND_SAGA[state.outcome.failedStep]?.escalation ?? null) : null,
    facts: [...ran, ...(ev?.facts ?? [])],
    inferences,
    unavailable,
    ...judge(orderId, version, inferences, failedLater ? { failedLater: { followUp: ev.followUp } } : {}),
  };
}

/** What the history itself records: the decisions taken through Updates, and how the run ended. */
async function readHistory(client: Client, handle: WorkflowHandle) {
  const events = (await handle.fetchHistory()).events ?? [];
  const converter = client.options.loadedDataConverter;
  const out = { facts: [] as Fact[], result: null as RefundResult | null, failure: null as string | null };
  for (const e of events) {
    const say = (says: string) => out.facts.push({ id: `history:${String(e.eventId)}`, says });
    const accepted = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest;
    if (accepted) {
      const input = await decodeFromPayloadsAtIndex<{ decision?: string; by?: string; reason?: string }>(
        converter,
        0,
        accepted.input?.args?.payloads,
      ).catch(() => null);
      say(
        `update ${accepted.input?.name} ${accepted.meta?.updateId} accepted: ${input?.decision} by ${input?.by} ("${input?.reason}")`,
      );
    }
    const completed = e.workflowExecutionCompletedEventAttributes;
    if (completed) {
      out.result = await decodeFromPayloadsAtIndex<RefundResult>(converter, 0, completed.result?.payloads).catch(
        () => null,
      );
      const reason = out.result && 'reason' in out.result ? ` (${out.result.reason})` : '';
      say(`the workflow completed: ${out.result?.status}${reason}`);
    }
    const failed = e.workflowExecutionFailedEventAttributes?.failure;
    if (failed) {
      // Its message may be an encoded attribute (encrypted with the payloads): decoded here.
      out.failure =
        (await decodeOptionalFailureToOptionalError(converter, failed).catch(() => undefined))?.message ??
        failed.message ??
        'failed';
      say(`the workflow failed: ${out.failure}`);
    }
    const cancel = e.workflowExecutionCancelRequestedEventAttributes;
    if (cancel)
      say(`cancellation requested by ${cancel.identity || 'someone'}${cancel.cause ? `: ${cancel.cause}` : ''}`);
    const terminated = e.workflowExecutionTerminatedEventAttributes;
    if (terminated) say(`terminated by ${terminated.identity || 'someone'}: ${terminated.reason || 'no reason given'}`);
  }
  return out;
}
