// What a refund run tells the visibility store (search attributes), so that operators find it by
// status, step, effect, verdict and whether it needs a person, without querying it; and, at the same
// moves, what its page in the Web UI says of it now (current-details.ts).
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SEARCH_ATTRIBUTES, type RefundRunState } from '../../contract';
import { showDetails, showRejectedDetails } from './current-details';

/** The run that moves: its state as the steps Query returns it. */
interface Shown {
  view(): RefundRunState;
}

/** startRefund starts a run with these set (in its started event); a run started another way (the CLI, a batch) says so itself. */
export function showStarted(run: Shown, orderId: string): void {
  showDetails(run.view());
  const started = workflowInfo().typedSearchAttributes;
  if (started.get(SEARCH_ATTRIBUTES.orderId) === orderId && started.get(SEARCH_ATTRIBUTES.status) === 'running') return;
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.orderId, value: orderId },
    { key: SEARCH_ATTRIBUTES.status, value: 'running' },
  ]);
}

/** Refused before anything ran: still findable as rejected, by its order when the input named a valid one. */
export function showRejectedInput(orderId: string | null, reason: string): void {
  showRejectedDetails(reason);
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: 'rejected' },
    { key: SEARCH_ATTRIBUTES.step, value: 'validate' },
    ...(orderId ? [{ key: SEARCH_ATTRIBUTES.orderId, value: orderId }] : []),
  ]);
}

export function showStatus(run: Shown, status: string, step?: string): void {
  // A run that completed has ended; any other status it moves to while it runs (or is parked) goes on.
  showDetails(run.view(), status === 'completed' ? 'COMPLETED' : 'RUNNING');
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: status },
    ...(step ? [{ key: SEARCH_ATTRIBUTES.step, value: step }] : []),
  ]);
}

/** Parked: findable by RefundNeedsAttention = true, with its verdict. */
export function showParked(run: Shown, step: string | null, effect: string, verdict: string): void {
  showDetails(run.view());
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: 'needs_attention' },
    { key: SEARCH_ATTRIBUTES.step, value: step ?? 'none' },
    { key: SEARCH_ATTRIBUTES.effect, value: effect },
    { key: SEARCH_ATTRIBUTES.verdict, value: verdict },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: true },
  ]);
}

/** A decision was taken: the run moves on, no longer among those that need a person. */
export function showUnparked(run: Shown): void {
  showDetails(run.view());
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: 'running' },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: false },
  ]);
}

export function showEnded(run: Shown, status: string, step: string | null, effect: string): void {
  showDetails(run.view(), 'COMPLETED');
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.status, value: status },
    { key: SEARCH_ATTRIBUTES.step, value: step ?? 'none' },
    { key: SEARCH_ATTRIBUTES.effect, value: effect },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: false },
  ]);
}

/** A run that ended with work left for a person (cancelled mid-saga) is still among the runs that need one. */
export function flagForAttention(run: Shown, effect: string): void {
  const state = run.view();
  // Left needing a person: by a cancellation (it says needs_attention), or stopped when an approval expired.
  showDetails(state, state.status === 'needs_attention' ? 'CANCELED' : 'COMPLETED');
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.effect, value: effect },
    { key: SEARCH_ATTRIBUTES.verdict, value: 'stop and hand to a person' },
    { key: SEARCH_ATTRIBUTES.needsAttention, value: true },
  ]);
}
