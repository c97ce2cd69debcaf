// A step's failure as the workflows see it: its classification from the activity's failure details, or from the
// Temporal failure when it carries none.
import { ActivityFailure, ApplicationFailure, isCancellation, TimeoutFailure } from '@temporalio/workflow';
import type { CompensationRecord, StepError } from '../../contract';
import type { AttemptSummary } from '../../reliability/attempt-ledger';
import type { Resumed } from './desk';
import {
  DOMAIN_OF,
  readFailureDetails,
  type Boundary,
  type Certainty,
  type FailureCode,
} from '../../reliability/taxonomy';

export type { StepError };

/** Raised when a step has failed for good (its retry policy gave up, or its result did not fit). */
export class StepFailedError extends Error {
  constructor(
    readonly step: string,
    readonly error: StepError,
  ) {
    super(`step ${step} failed: ${error.code}: ${error.message}`);
  }
}

/** The activity finished, so whatever it did happened; what it returned cannot be used. */
export const unusable = (message: string) => stepError('POISON', 'undeterminable', 'result_unusable', message);

export function stepError(
  code: FailureCode,
  certainty: Certainty,
  reason: string,
  message: string,
  extra: Partial<StepError> = {},
): StepError {
  return {
    code,
    domain: DOMAIN_OF[code],
    certainty,
    reason,
    message,
    nonRetryable: true,
    retryAfterMs: null,
    nextDelayMs: null,
    providerRequestId: null,
    provider: {},
    ...extra,
  };
}

/**
 * A failed activity as a step error. A Temporal timeout carries no classification of ours: an effect may have
 * happened when the step `sends` one, while a read or a store write (one transaction) changed nothing.
 */
export function describeFailure(
  err: unknown,
  boundary: Boundary,
  what: string,
  sends: boolean,
): { error: StepError; ledger: AttemptSummary[] } {
  // A cancelled run, or a bug in workflow code (let the workflow task fail and retry): not a step failure.
  if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) {
    const details = readFailureDetails(cause.details) as
      (ReturnType<typeof readFailureDetails> & { ledger?: AttemptSummary[] }) | undefined;
    const nonRetryable = cause.nonRetryable ?? false;
    if (!details) {
      const error = stepError('POISON', 'undeterminable', cause.type ?? 'unclassified', `${what}: ${cause.message}`);
      return { error: { ...error, nonRetryable }, ledger: [] };
    }
    const { code, certainty, reason, retryAfterMs, nextDelayMs, providerRequestId, provider } = details;
    const extra = { nonRetryable, retryAfterMs, nextDelayMs, providerRequestId, provider };
    return { error: stepError(code, certainty, reason, cause.message, extra), ledger: details.ledger ?? [] };
  }
  const retried = { nonRetryable: false };
  if (cause instanceof TimeoutFailure) {
    const message = `${what} timed out at ${boundary} (${cause.timeoutType}); ${sends ? 'its request may have reached the provider' : 'it changed nothing a new attempt would not repeat'}`;
    const error = sends
      ? stepError('UNKNOWN_OUTCOME', 'may_have_executed', 'activity_timeout', message, retried)
      : stepError('TRANSIENT_DEPENDENCY', 'not_executed', 'activity_timeout', message, retried);
    return { error, ledger: [] };
  }
  const message = `${what}: ${cause?.message ?? err.message}`;
  return { error: stepError('POISON', 'undeterminable', cause?.name ?? 'unknown', message, retried), ledger: [] };
}

/**
 * The hand-over a person judged (a notice's, a correction's), named by its stamp in the failure they saw (the
 * store's clock), so that an approved resend covers it and no later one: the workflow's clock is never compared.
 */
export function judgedHandOver(failure: StepError | undefined): { approvedHandOver?: string } {
  // Only a hand-over that ended unknown is one a person judged; one still in progress is waited for, never named.
  const since = failure?.code === 'UNKNOWN_OUTCOME' ? failure.provider?.sendingSince : undefined;
  return typeof since === 'string' ? { approvedHandOver: since } : {};
}

/** What a resend a person approved at `at` carries: their approval and the hand-over they judged; nothing without it. */
const approvedResend = (at: string | undefined, failure: StepError | undefined) =>
  at === undefined ? {} : { resendApprovedAt: at, ...judgedHandOver(failure) };

/**
 * A person's retry of a send whose hand-over ended unknown: their approval to resend it, naming the hand-over they
 * judged. Any other retry (of a failure that sent nothing, of a hand-over still in progress) approves no resend.
 */
export function approvedRetry<Step extends string>(resumed: Resumed<Step> | null, step: Step, failure?: StepError) {
  const retried = resumed?.kind === 'retry-step' && resumed.step === step;
  return approvedResend(retried && failure?.code === 'UNKNOWN_OUTCOME' ? resumed.record.at : undefined, failure);
}

/** A correction's resend a person approved: only of one whose earlier hand-over is unknown, covering the one they judged. */
export const approvedCorrection = (at: string | undefined, previous: CompensationRecord | undefined) =>
  approvedResend(previous?.status === 'unknown' ? at : undefined, previous?.error);
