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
  FOLLOW_UP_WORKFLOW,
  operationId as operationIdOf,
  parseFollowUpWorkflowId,
  parseRefundWorkflowId,
  SEARCH_ATTRIBUTES,
  stepsQuery,
  type RefundResult,
  type RefundRunState,
  type RefundWorkflow,
  type StepRecord,
} from '../contract';
import { effectOfRecord, inspectedVerdict, type Verdict } from '../reliability/verdict';
import type { OperationRecord } from '../store/types';
import { gatherEvidence, type Evidence, type EvidenceSources, type Fact } from './facts';

export interface Inference {
  claim: string;
  /** confirmed by the facts it names; to be confirmed where there is no evidence; contradicted by them. */
  status: 'confirmed' | 'to be confirmed' | 'contradicted';
  basis: string[];
  /** For one to be confirmed: how to confirm it. */
  check?: string;
}

export interface Inspection {
  workflowId: string;
  runId: string;
  /** Temporal's view: RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED … */
  execution: string;
  refundStatus: string | null;
  orderId: string | null;
  operationId: string | null;
  startedAt: string;
  closedAt: string | null;
  steps: StepRecord[] | null;
  /** Why there is no step table, when there is none. */
  stateUnavailable: string | null;
  outcome: RefundRunState['outcome'];
  /** The registry's escalation path for the step the run stopped at. */
  escalation: string | null;
  decisions: RefundRunState['decisions'];
  facts: Fact[];
  inferences: Inference[];
  unavailable: string[];
  verdict: Verdict;
  nextAction: string;
  /** The decision that takes the next action (`retry-step:<step>` for a retry); null when no decision is needed. */
  decision: string | null;
  decidedBy: string[];
  approvedBy: string[];
}

export async function inspectRun(
  client: Client,
  sources: EvidenceSources,
  scope: string,
  workflowId: string,
): Promise<Inspection> {
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
  // A Query needs a worker, even for a closed run: without one it would wait, so ask only when one polls.
  else if (!(await workerPolling(client)))
    stateUnavailable =
      'no worker is polling, so the run cannot be queried for its step table; start one with `npm start`';
  else {
    state = await handle.query(stepsQuery).catch((err: Error) => {
      stateUnavailable = `the steps Query failed: ${err.message}`;
      return null;
    });
  }
  const result = history.result;
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
  const facts: Fact[] = [
    {
      id: `temporal:${workflowId}`,
      says: `${execution}${sa.get(SEARCH_ATTRIBUTES.status) ? `, RefundStatus ${sa.get(SEARCH_ATTRIBUTES.status)}` : ''}; ${described.historyLength} history events`,
    },
  ];
  facts.push(...history.facts, ...(ev?.facts ?? []));
  const inferences = ev ? infer(state, result, ev) : [];
  const unavailable = [
    ...(ev?.unavailable ?? (orderId ? [] : ['evidence: the run names no order, so there is nothing to look up'])),
    ...(stateUnavailable ? [stateUnavailable] : []),
  ];
  const lastFollowUp = ev?.audit.filter((a) => a.event === 'follow_up').at(-1);
  const followUp = lastFollowUp
    ? {
        workflowId: String(lastFollowUp.detail.followUp ?? lastFollowUp.actor),
        status: String(lastFollowUp.detail.status),
        reason: String(lastFollowUp.detail.reason ?? ''),
      }
    : null;
  const failedLater = !followUpRun && ev?.operation?.status === 'failed' && result?.status === 'completed';
  const verdict = inspectedVerdict({
    execution,
    state,
    result,
    failure: history.failure,
    inferences,
    parkedVerdict: sa.get(SEARCH_ATTRIBUTES.verdict) ?? null,
    orderId,
    version,
    ...(failedLater && { failedLater: { followUp } }),
  });
  return {
    workflowId,
    runId: described.runId,
    execution,
    refundStatus: state?.status ?? sa.get(SEARCH_ATTRIBUTES.status) ?? null,
    orderId,
    operationId,
    startedAt: described.startTime.toISOString(),
    closedAt: described.closeTime?.toISOString() ?? null,
    steps: state?.steps ?? null,
    stateUnavailable,
    outcome: state?.outcome ?? null,
    escalation: state?.outcome?.failedStep ? REFUND_SAGA[state.outcome.failedStep].escalation : null,
    decisions: state?.decisions ?? [],
    facts,
    inferences,
    unavailable,
    ...verdict,
  };
}

interface HistoryFacts {
  facts: Fact[];
  result: RefundResult | null;
  failure: string | null;
}

/** What the history itself records: the decisions taken through Updates, and how the run ended. */
async function readHistory(client: Client, handle: WorkflowHandle): Promise<HistoryFacts> {
  const events = (await handle.fetchHistory()).events ?? [];
  const converter = client.options.loadedDataConverter;
  const out: HistoryFacts = { facts: [], result: null, failure: null };
  for (const e of events) {
    const id = `history:${String(e.eventId)}`;
    const accepted = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest;
    if (accepted) {
      const input = await decodeFromPayloadsAtIndex<{ decision?: string; by?: string; reason?: string }>(
        converter,
        0,
        accepted.input?.args?.payloads,
      ).catch(() => null);
      out.facts.push({
        id,
        says: `update ${accepted.input?.name} ${accepted.meta?.updateId} accepted: ${input?.decision} by ${input?.by} ("${input?.reason}")`,
      });
    }
    const completed = e.workflowExecutionCompletedEventAttributes;
    if (completed) {
      out.result = await decodeFromPayloadsAtIndex<RefundResult>(converter, 0, completed.result?.payloads).catch(
        () => null,
      );
      out.facts.push({
        id,
        says: `the workflow completed: ${out.result?.status}${out.result && 'reason' in out.result ? ` (${out.result.reason})` : ''}`,
      });
    }
    const failed = e.workflowExecutionFailedEventAttributes?.failure;
    if (failed) {
      // Its message may be an encoded attribute (encrypted with the payloads): decoded here.
      out.failure =
        (await decodeOptionalFailureToOptionalError(converter, failed).catch(() => undefined))?.message ??
        failed.message ??
        'failed';
      out.facts.push({ id, says: `the workflow failed: ${out.failure}` });
    }
    const cancel = e.workflowExecutionCancelRequestedEventAttributes;
    if (cancel)
      out.facts.push({
        id,
        says: `cancellation requested by ${cancel.identity || 'someone'}${cancel.cause ? `: ${cancel.cause}` : ''}`,
      });
    const terminated = e.workflowExecutionTerminatedEventAttributes;
    if (terminated)
      out.facts.push({
        id,
        says: `terminated by ${terminated.identity || 'someone'}: ${terminated.reason || 'no reason given'}`,
      });
  }
  return out;
}

const ACTIVE = (r: { status: string | null }) => r.status !== 'failed' && r.status !== 'canceled';

/** What the facts say about the three effects: the refund, the order, the customer's email (and its correction). */
export function infer(state: RefundRunState | null, result: RefundResult | null, ev: Evidence): Inference[] {
  const out: Inference[] = [];
  // A refund the provider failed after the run finished is failed, whatever the run last believed.
  const failedLater = ev.operation?.status === 'failed';
  // A run that says nothing was sent while the record holds a send of open outcome (an older run's word) is overruled by the record.
  const recorded = beliefOf(ev.operation);
  const said = state?.effect.status === 'none' && recorded === 'unknown' ? recorded : state?.effect.status;
  const belief = failedLater ? 'failed' : (said ?? (result?.status === 'completed' ? 'refunded' : recorded));
  const refundId =
    state?.effect.refundId ??
    (result?.status === 'completed' ? result.refund.refundId : (ev.operation?.refund?.refundId ?? null));
  const basis = ev.facts.filter((f) => f.id.startsWith('stripe:') || f.id.startsWith('ledger:')).map((f) => f.id);
  // The provider's list says which refunds stand; the local server's ledger, which were ever made under our key.
  const active = ev.refunds?.filter(ACTIVE) ?? null;
  const made = ev.ledgerRefunds;
  const ask = `ask Stripe for the refunds of the order's payment intent with metadata.operation_id ${ev.operationId}`;
  if (active === null && made === null)
    out.push({ claim: `the refund is ${belief}`, status: 'to be confirmed', basis: [], check: ask });
  else if ((active?.length ?? 0) > 1 || (made ?? 0) > 1)
    out.push({ claim: `exactly one refund exists for operation ${ev.operationId}`, status: 'contradicted', basis });
  else if (belief === 'refunded' || belief === 'partial') {
    const matches = active ? active.length === 1 && (refundId === null || active[0]!.id === refundId) : made === 1;
    out.push({
      claim: `refund ${refundId ?? active?.[0]?.id ?? '(no id)'} exists at the provider, once`,
      status: matches ? 'confirmed' : 'contradicted',
      basis,
    });
  } else if (belief === 'unknown') {
    if ((active?.length ?? made) === 1) {
      out.push({
        claim: `a refund exists for this operation${active?.[0] ? ` (${active[0].id})` : ''}, which the run has not yet recorded`,
        status: 'confirmed',
        basis,
      });
    } else {
      out.push({
        claim: 'no refund exists for this operation',
        status: 'to be confirmed',
        basis,
        check:
          'none is listed now, but a request in flight may still land and the list can lag: retry-step create_refund reconciles before anything is sent',
      });
    }
  } else if (active) {
    // none or failed: nothing should stand.
    out.push({ claim: 'nothing was refunded', status: active.length === 0 ? 'confirmed' : 'contradicted', basis });
  } else {
    out.push({
      claim: 'nothing was refunded',
      status: made === 0 ? 'confirmed' : 'to be confirmed',
      basis,
      ...(made !== 0 && { check: `a refund was made under this key: ${ask}, and check that it failed` }),
    });
  }

  const steps = state?.steps;
  const updated = steps?.find((s) => s.name === 'update_order');
  const appliedId = `store:applied:${ev.operationId}`;
  if (ev.applied?.revertedByKey)
    out.push({
      claim: 'the order was restored: the refund was taken off it by its compensation',
      status: 'confirmed',
      basis: [appliedId],
    });
  else if (ev.applied) {
    const should = belief === 'refunded' || belief === 'partial' || belief === 'unknown';
    out.push({
      claim: `the order records refund ${ev.applied.refundId}`,
      status: should ? 'confirmed' : 'contradicted',
      basis: [appliedId, `store:order:${ev.order?.id ?? ''}`],
    });
  } else {
    const claimed = updated?.status === 'completed' && !updated.compensation;
    out.push({
      claim: 'the order does not show a refund for this operation',
      status: claimed ? 'contradicted' : 'confirmed',
      basis: [`store:order:${ev.order?.id ?? ''}`],
    });
  }

  out.push(
    emailInference(
      'the customer notice',
      ev.notice,
      ev.noticeMessageId,
      ev.mailbox?.notice ?? null,
      ev.mailbox !== null,
    ),
  );
  if (ev.correction)
    out.push(
      emailInference(
        'the correction',
        ev.correction,
        ev.correctionMessageId,
        ev.mailbox?.correction ?? null,
        ev.mailbox !== null,
      ),
    );
  return out;
}

function emailInference(
  what: string,
  entry: Evidence['notice'],
  messageId: string,
  received: number | null,
  readable: boolean,
): Inference {
  const basis = [...(entry ? [`store:outbox:${entry.key}`] : []), ...(readable ? [`mailbox:${messageId}`] : [])];
  const check = `look for Message-ID ${messageId} at the mail provider`;
  if (!entry) {
    if (!readable) return { claim: `${what} was not sent`, status: 'to be confirmed', basis, check };
    return { claim: `${what} was not sent`, status: received ? 'contradicted' : 'confirmed', basis };
  }
  if (!readable)
    return { claim: `${what} ${messageId} reached the mail server`, status: 'to be confirmed', basis, check };
  if (received && received > 1)
    return { claim: `${what} ${messageId} was delivered once`, status: 'contradicted', basis };
  if (received === 1)
    return {
      claim: `${what} ${messageId} reached the mailbox, once`,
      status: entry.status === 'pending' ? 'contradicted' : 'confirmed',
      basis,
    };
  if (entry.status === 'sent')
    return { claim: `${what} ${messageId} reached the mailbox`, status: 'contradicted', basis };
  if (entry.status === 'sending') {
    return {
      claim: `${what} ${messageId} was not delivered`,
      status: 'to be confirmed',
      basis,
      check: `its hand-over never learned the answer and it is not in the mailbox now; a resend goes out with the same Message-ID`,
    };
  }
  return { claim: `${what} was not sent`, status: 'confirmed', basis };
}

/** What the operation's record says of the refund, the way the run decides it (effectOfRecord). */
function beliefOf(operation: OperationRecord | null | undefined): string {
  return operation ? effectOfRecord(operation).status : 'none';
}
