// The state of one refund run, as the `steps` Query shows it: the step table, the operation's
// identity, what is known of the effect, the last failure and the move the policy chose for it,
// reconciliation, budgets, and why the run stopped or where it parked.
import type { RefundStep } from '../../compensations/registry';
import type { NotificationReceipt, OrderReceipt, ReconcileOutcome, RefundReceipt } from '../../receipts';
import type { RecoveryAction, RecoveryOwner } from '../../reliability/policy';
import type { Certainty } from '../../reliability/taxonomy';
import type { VerdictView } from '../../reliability/verdict';
import type { RefundRequest } from '../../shared';
import type { IgnoredMessagesView } from '../messages';
import type { ProviderEventSummary } from '../provider-events';
import type { DecisionRecord } from './decision-desk';
import type { BudgetView } from './run-budget';
import type { StepError, StepRecord } from './step-runner';

/**
 * Live: running, reconciling, awaiting_provider, compensating. Parked, waiting for a person:
 * needs_attention, awaiting_approval. Ended: completed, rejected (refused; nothing happened),
 * compensated, abandoned (a person took over), stopped (an approval expired, or it was cancelled
 * before its refund went out).
 */
export type RunStatus =
  | 'running'
  | 'reconciling'
  | 'awaiting_provider'
  | 'compensating'
  | 'needs_attention'
  | 'awaiting_approval'
  | 'completed'
  | 'rejected'
  | 'compensated'
  | 'abandoned'
  | 'stopped';
export type TerminalStatus = Extract<RunStatus, 'completed' | 'rejected' | 'compensated' | 'abandoned' | 'stopped' | 'needs_attention'>;

/** What is known of the refund at the provider: `unknown` stays unknown until the provider says otherwise. */
export type EffectStatus = 'none' | 'unknown' | 'refunded' | 'partial' | 'failed';

export interface RefundRunState {
  workflowId: string;
  request: RefundRequest;
  status: RunStatus;
  operation: {
    operationId: string;
    operationVersion: number;
    scope: string;
    requestHash: string;
    /** Whether this run recorded the intent, or found it from an earlier run of the same operation. */
    recordedByThisRun: boolean;
    /** After this, a resend with the same key could create a second refund: only reconciliation may precede one. */
    dedupeWindowExpiresAt: string | null;
    expectedReceipt: string;
    policyVersion: string;
  } | null;
  effect: { status: EffectStatus; certainty: Certainty | 'none'; refundId: string | null };
  provider: { name: 'stripe'; scope: string | null; changed: false };
  lastFailure: (StepError & { step: string }) | null;
  recovery: { action: RecoveryAction; owner: RecoveryOwner; note: string | null } | null;
  reconciliation: {
    lookups: number;
    lastResult: ReconcileOutcome | null;
    lastAt: string | null;
    /** Where the last lookup got to: by refund id, or how many of the payment intent's refunds it read. */
    cursor: { method: 'retrieve' | 'list'; scanned: number; matches: number } | null;
    resubmissions: number;
    history: { at: string; operationId: string; result: ReconcileOutcome; note: string }[];
  };
  budget: BudgetView;
  /** Why the run stopped, or parked, when it did not complete. */
  outcome: { status: TerminalStatus; failedStep: RefundStep | null; reason: string; quarantined: boolean } | null;
  /** While parked: since when, the verdict, the smallest next action and who may take it. */
  parked: ({ since: string; failedStep: RefundStep | null; reason: string } & VerdictView) | null;
  decisions: DecisionRecord[];
  /** Provider events (webhooks) received for this run, each once. */
  providerEvents: ProviderEventSummary[];
  /** Signals the run ignored (malformed, or about another refund): how many, the latest, and why. */
  ignoredMessages: IgnoredMessagesView;
  /** While (and after) the run waited for the provider to settle a pending refund: until when, and how it was settled. */
  awaitingProvider: AwaitingProvider | null;
  steps: StepRecord[];
}

export interface AwaitingProvider {
  refundId: string;
  since: string;
  /** The policy's deadline: still pending then, the run parks for a person. */
  until: string;
  /** Polls of the provider while no webhook settled it. */
  polls: number;
  /** How it ended: a webhook (its event id), a poll, or the deadline; null while it waits. */
  settledBy: { kind: 'webhook'; eventId: string } | { kind: 'poll' } | { kind: 'deadline' } | null;
}

export interface CompletedRefund {
  workflowId: string;
  orderId: string;
  operationId: string;
  status: 'completed';
  refund: RefundReceipt;
  order: OrderReceipt;
  notification: NotificationReceipt;
}

/** An outcome the business expects, not a bug: the run completes with it (Failed is for incidents). */
export interface EndedRefund {
  workflowId: string;
  orderId: string | null;
  operationId: string | null;
  status: 'rejected' | 'compensated' | 'abandoned' | 'stopped';
  reason: string;
  failedStep: RefundStep | null;
}

export type RefundResult = CompletedRefund | EndedRefund;
