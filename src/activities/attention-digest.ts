// The operators' digest: the refund runs that wait for a person, one email per scheduled occurrence.
import type { AttentionRun } from '../inspect/attention';
import type { MailText } from './outbox';

export const DEFAULT_DIGEST_TO = 'refund-ops@durable-refunds.test';

export interface DigestInput {
  /** `digest:<occurrence id>`. */
  key: string;
  occurrenceId: string;
  /** The occurrence as people name it: its scheduled instant (UTC). */
  label: string;
  /** How many runs wait; the first of them are listed. */
  total: number;
  runs: AttentionRun[];
}

export function digestMail(input: DigestInput): MailText {
  const subject = `Refunds waiting for a person: ${input.label}`;
  if (input.total === 0) return { subject, text: `No refund run waits for a person (${input.occurrenceId}).` };
  const lines = input.runs.map(
    (r) =>
      `- ${r.workflowId} (order ${r.orderId ?? '?'}): ${r.execution}, ${r.status ?? '?'} at ${r.step ?? '?'}, refund ${r.effect ?? '?'}; ${r.verdict ?? ''}`,
  );
  const more =
    input.total > input.runs.length
      ? [`…and ${input.total - input.runs.length} more: npm run inspect -- --attention`]
      : [];
  const text = [
    `${input.total} refund run(s) wait for a person (${input.occurrenceId}):`,
    '',
    ...lines,
    ...more,
    '',
    'Inspect one with npm run inspect -- <workflow id>.',
  ].join('\n');
  return { subject, text };
}
