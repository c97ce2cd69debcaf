// A scheduled occurrence's identity: the schedule that fired it and the instant it was scheduled
// for, from the search attributes Temporal sets on every run a Schedule starts. A redelivered or
// re-run occurrence (a reset, a retry of the same action) has the same identity whatever its
// workflow id, so every key an occurrence uses is built from it.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { workflowInfo } from '@temporalio/workflow';

const SCHEDULED_BY = defineSearchAttributeKey('TemporalScheduledById', SearchAttributeType.KEYWORD);
const SCHEDULED_AT = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

export interface Occurrence {
  /** `<schedule id>@<scheduled instant, ISO>`; `manual:<workflow id>` for a run no Schedule started. */
  id: string;
  scheduleId: string | null;
  scheduledAt: string | null;
}

export function currentOccurrence(): Occurrence {
  const info = workflowInfo();
  const scheduleId = info.typedSearchAttributes.get(SCHEDULED_BY);
  const at = info.typedSearchAttributes.get(SCHEDULED_AT);
  if (!scheduleId || !at) return { id: `manual:${info.workflowId}`, scheduleId: null, scheduledAt: null };
  const scheduledAt = at.toISOString();
  return { id: `${scheduleId}@${scheduledAt}`, scheduleId, scheduledAt };
}
