// A saga run's state, and a refund run's, as the `steps` Query shows it. Types only.
import type { RefundRequest } from '../domain/refund-request';
import type { AttemptSummary } from '../reliability/attempt-ledger';
import type { RecoveryAction, RecoveryOwner } from '../reliability/policy-terms';
import type { Certainty, FailureCode } from '../reliability/taxonomy';
import type { ParkedEvidence, VerdictView } from '../reliability/verdict';
import type { DecisionRecord } from './decision';
import type { ProviderEventSummary } from './provider-event';
import type { ReconcileOutcome, ReconcileResult } from './receipts';
import type { RefundStep } from './steps';

/**
 * Live: running, reconciling, awaiting_provider, compensating. Parked, waiting for a person:
 * needs_attention, awaiting_approval. Ended: completed, rejected (refused; nothing happened),
 * compensated, abandoned (a person took over), stopped (an approval expired, or it was cancelled
 * before its refund went out).
 */
export type RunStatus =
  'running' | 'reconciling' | 'awaiting_provider' | 'compensating' | 'awaiting_approval' | TerminalStatus;
/** Where a run ends, or parks for a person: the status of its outcome. */
export type TerminalStatus = 'completed' | 'rejected' | 'compensated' | 'abandoned' | 'stopped' | 'needs_attention';

/** What is known of a saga's effect at its provider (docs/harness.md, "Statuses"): unknown until the provider says. */
export type EffectStatus = 'none' | 'unknown' | 'refunded' | 'partial' | 'failed' | 'charged' | 'declined';

/**
 * A step's status, its undo's, and a step call's: one vocabulary (docs/harness.md, "Statuses"). An undo's unknown is
 * quarantined for a person, never retried blind; held is a person's to decide.
 */
export type StepStatus =
  | 'pending'
  | 'running'
  | 'completed'
  | 'failed'
  | 'skipped'
  | 'awaiting_provider'
  | 'unknown'
  | 'held'
  | 'not_compensable';
export type CallStatus = Extract<StepStatus, 'completed' | 'failed' | 'unknown'>;

/** Resends with the same key after reconciliation, at most: a provider that keeps losing answers needs a person. */
export const MAX_RESUBMISSIONS = 3;

/** A saga run's state as the `steps` Query shows it, whatever the saga: the part `inspect` and `decide` read alike. */
export interface RunState<Request = unknown, Step extends string = string> {
  workflowId: string;
  /** This run of it: a reset starts another, which no decision signed for this one answers. */
  runId: string;
  /** Which saga it is (absent: a refund, as every run before the checkout saga). */
  saga?: string;
  request: Request;
  status: RunStatus;
  /** What is known of the saga's effect at its provider (the refund, the charge). */
  effect: { status: EffectStatus; certainty: Certainty | 'none' };
  lastFailure: (StepError & { step: string }) | null;
  recovery: { action: RecoveryAction; owner: RecoveryOwner; note: string | null } | null;
  budget: BudgetView;
  /** Why the run stopped, or parked, when it did not complete. */
  outcome: { status: TerminalStatus; failedStep: Step | null; reason: string; quarantined: boolean } | null;
  /**
   * While parked: since when, the verdict, the smallest next action and who may take it, and the
   * evidence the verdict was drawn from (its facts, who may decide), from which `inspect` draws it again.
   */
  parked: ({ since: string; failedStep: Step | null; reason: string } & VerdictView & ParkedEvidence) | null;
  decisions: DecisionRecord[];
  ignoredMessages: IgnoredMessagesView;
  steps: StepRecord[];
}

export interface RefundRunState extends RunState<RefundRequest, RefundStep> {
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
  effect: {
    status: Exclude<EffectStatus, 'charged' | 'declined'>;
    certainty: Certainty | 'none';
    refundId: string | null;
  };
  provider: { name: 'stripe'; scope: string | null; changed: false };
  reconciliation: {
    lookups: number;
    lastResult: ReconcileOutcome | null;
    lastAt: string | null;
    /** Where the last lookup got to: by refund id, or how many of the payment intent's refunds it read. */
    cursor: Pick<ReconcileResult, 'method' | 'scanned' | 'matches'> | null;
    resubmissions: number;
    history: { at: string; operationId: string; result: ReconcileOutcome; note: string }[];
  };
  /** Provider events (webhooks) received for this run, each once. */
  providerEvents: ProviderEventSummary[];
  /** While (and after) the run waited for the provider to settle a pending refund: until when, and how it was settled. */
  awaitingProvider: AwaitingProvider | null;
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

export interface StepError {
  code: FailureCode;
  domain: string;
  certainty: Certainty;
  reason: string;
  message: string;
  /** Whether Temporal gave up because the policy said so (true) or because attempts or time ran out. */
  nonRetryable: boolean;
  retryAfterMs: number | null;
  nextDelayMs: number | null;
  providerRequestId: string | null;
  provider: Record<string, unknown>;
}

/** What a step's call and its undo's alike record: how it came out, when, and what it spent. */
interface CallRecord {
  output?: unknown;
  error?: StepError;
  startedAt?: string;
  finishedAt?: string;
  /** Logical attempts (Temporal activity attempts) in this run, and provider requests they sent. */
  attempts: number;
  transportRequests: number;
  /** Why it was skipped, or where its output came from when no provider was asked. */
  note?: string;
}

export interface CompensationRecord extends CallRecord {
  kind: 'compensation' | 'forward_repair';
  key?: string;
  status: Exclude<StepStatus, 'pending' | 'skipped' | 'awaiting_provider'>;
}

export interface StepRecord extends CallRecord {
  name: string;
  status: Exclude<StepStatus, 'unknown' | 'held' | 'not_compensable'>;
  idempotencyKey?: string;
  input?: unknown;
  /** Each attempt, from the attempt ledger: when, how it ended, how long it was told to wait. */
  ledger: AttemptSummary[];
  compensation?: CompensationRecord;
}

/** What the run may still spend: its deadline, step attempts, retry time and provider calls. */
export interface BudgetView {
  deadline: string;
  remainingMs: number;
  maxStepAttempts: number;
  retryTimeUsedMs: number;
  retryTimeLimitMs: number;
  providerCallsUsed: number;
  providerCallLimit: number;
}

/** The Signals a run ignored (malformed, or about another refund): how many, and the latest few (when, the Signal's name, why, and what came as JSON, cut short). */
export interface IgnoredMessagesView {
  total: number;
  latest: { at: string; message: string; reason: string; input: string }[];
}
