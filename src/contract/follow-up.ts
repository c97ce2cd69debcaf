// A follow-up run: what it takes, its state as the `followUp` Query shows it, and what it returns.
// One per operation, for a refund the provider reported failed after the refund's own run finished.
import type { CallStatus, IgnoredMessagesView, RunStatus, StepError } from './run-state';
import type { ProviderEventSummary } from './provider-event';
import type { RefundStep } from './steps';

export interface FollowUpInput {
  operationId: string;
  /** The refund the provider's event named. */
  refundId: string;
  /** The run that carried the operation out and had finished when the event came. */
  originalWorkflowId: string;
}

export interface FollowUpCompensation {
  step: RefundStep;
  key: string;
  status: CallStatus;
  output?: unknown;
  error?: StepError;
}

export interface FollowUpResult {
  workflowId: string;
  operationId: string;
  originalWorkflowId: string;
  /** compensated: what stood was undone (or nothing stood); unchanged: the provider does not say failed; needs_attention: a person finishes it. */
  status: Extract<RunStatus, 'compensated' | 'needs_attention'> | 'unchanged';
  reason: string;
  refund: { refundId: string; status: string } | null;
  compensations: FollowUpCompensation[];
}

export interface FollowUpState {
  input: FollowUpInput;
  /** reconciling: it asks the provider how the refund stands. */
  status: Extract<RunStatus, 'reconciling' | 'compensating'> | FollowUpResult['status'];
  providerEvents: ProviderEventSummary[];
  ignoredMessages: IgnoredMessagesView;
  compensations: FollowUpCompensation[];
  reason: string | null;
}

/** The follow-up workflow's type, for clients that start it by name (FOLLOW_UP_WORKFLOW); src/worker-pools.ts checks it. */
export type FollowUpWorkflow = (input: FollowUpInput) => Promise<FollowUpResult>;
