// A scheduled occurrence's identity: the schedule that fired it and the instant it was scheduled
// for, from the search attributes Temporal sets on every run a Schedule starts. A redelivered or
// re-run occurrence (a reset, a retry of the same action) has the same identity whatever its
// workflow id, so every key an occurrence uses is built from it. And how a scheduled run reads its options.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { ApplicationFailure, workflowInfo } from '@temporalio/workflow';
import { isUndecodable } from '../codec/payload-converter';
import { refusePlaintext } from '../saga/workflow/messages';

const SCHEDULED_BY = defineSearchAttributeKey('TemporalScheduledById', SearchAttributeType.KEYWORD);
const SCHEDULED_AT = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

/** Its id is `<schedule id>@<scheduled instant, ISO>`, or `manual:<workflow id>` for a run no Schedule started. */
export function currentOccurrence() {
  const info = workflowInfo();
  const scheduleId = info.typedSearchAttributes.get(SCHEDULED_BY);
  const at = info.typedSearchAttributes.get(SCHEDULED_AT);
  if (!scheduleId || !at) return { id: `manual:${info.workflowId}`, scheduleId: null, scheduledAt: null };
  const scheduledAt = at.toISOString();
  return { id: `${scheduleId}@${scheduledAt}`, scheduleId, scheduledAt };
}

/** Refuses options nobody could decode: defaults are no answer to them (payload-converter.ts; no older history holds such). */
export function refuseUndecodable(options: unknown): void {
  refusePlaintext(options);
  if (isUndecodable(options))
    throw ApplicationFailure.nonRetryable(
      `its options could not be decoded: ${options.$undecodable}`,
      'INVALID_ARGUMENTS',
    );
}

/** An option as a whole number, refused outside `min`-`max`. */
export function wholeNumber(name: string, value: unknown, min: number, max: number): number {
  const n = Math.trunc(Number(value));
  if (!(n >= min && n <= max))
    throw ApplicationFailure.nonRetryable(
      `${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`,
    );
  return n;
}
