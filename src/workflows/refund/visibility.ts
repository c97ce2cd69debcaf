// What a refund run tells the visibility store (search attributes), so that operators find it by
// status, step, effect, verdict and whether it needs a person, without querying it.
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SEARCH_ATTRIBUTES } from '../../contract';

/** startRefund starts a run with these set (in its started event); a run started another way (the CLI, a batch) says so itself. */
export function showStarted(orderId: string): void {
  const started = workflowInfo().typedSearchAttributes;
  if (started.get(SEARCH_ATTRIBUTES.orderId) === orderId && started.get(SEARCH_ATTRIBUTES.status) === 'running') return;
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.orderId, value: orderId },
    { key: SEARCH_ATTRIBUTES.status, value: 'running' },
  ]);
}

/** Refused before anything ran: still findable as rejected, by its order when the input named a valid one. */
export function showRejectedInput(orderId: string | null): void {
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: 'rejected' },
    { key: SEARCH_ATTRIBUTES.step, value: 'validate' },
    ...(orderId ? [{ key: SEARCH_ATTRIBUTES.orderId, value: orderId }] : []),
  ]);
}

export function showStatus(status: string, step?: string): void {
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: status },
    ...(step ? [{ key: SEARCH_ATTRIBUTES.step, value: step }] : []),
  ]);
}

/** Parked: findable by RefundNeedsAttention = true, with its verdict. */
export function showParked(step: string | null, effect: string, verdict: string): void {
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: 'needs_attention' },
    { key: SEARCH_ATTRIBUTES.step, value: step ?? 'none' },
    { key: SEARCH_ATTRIBUTES.effect, value: effect },
    { key: SEARCH_ATTRIBUTES.verdict, value: verdict },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: true },
  ]);
}

/** A decision was taken: the run moves on, no longer among those that need a person. */
export function showUnparked(): void {
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: 'running' },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: false },
  ]);
}

export function showEnded(status: string, step: string | null, effect: string): void {
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: status },
    { key: SEARCH_ATTRIBUTES.step, value: step ?? 'none' },
    { key: SEARCH_ATTRIBUTES.effect, value: effect },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: false },
  ]);
}

/** A run that ended with work left for a person (cancelled mid-saga) is still among the runs that need one. */
export function flagForAttention(effect: string): void {
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.effect, value: effect },
    { key: SEARCH_ATTRIBUTES.verdict, value: 'stop and hand to a person' },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: true },
  ]);
}
