// A step's evidence: what its activity returns with its result (and its failures carry in their
// details): every attempt of the step in this run, as the attempt ledger recorded it, with the
// provider requests each one sent. Workflow code imports this module, so it stays pure.
import { outcomeUnknown } from './taxonomy';

export interface AttemptSummary {
  attempt: number;
  startedAt: string;
  /** Null when the attempt never finished (its worker died, or Temporal timed it out). */
  finishedAt: string | null;
  /** "ok", or the failure code it ended with; null when it never finished. */
  outcome: string | null;
  certainty: string | null;
  reason: string | null;
  transportRequests: number;
  retryAfterMs: number | null;
  nextDelayMs: number | null;
  providerRequestId: string | null;
}

export interface StepEvidence {
  /** The Temporal attempt that produced this result. */
  attempt: number;
  /** Every attempt of this step in this run, oldest first. */
  ledger: AttemptSummary[];
}

/** Whether an attempt may have taken effect: it said so, it took effect but failed after (its record not kept), or it never finished (its worker gone). */
export function mayHaveTakenEffect(a: Pick<AttemptSummary, 'certainty' | 'outcome' | 'finishedAt'>): boolean {
  return (
    outcomeUnknown(a.certainty) ||
    a.certainty === 'partial' ||
    (a.certainty === 'completed' && a.outcome !== 'ok') ||
    a.finishedAt === null
  );
}

/** Logical attempts and provider requests of a step, summed from its ledger. */
export function tally(evidence: StepEvidence | undefined): { attempts: number; transportRequests: number } {
  if (!evidence) return { attempts: 0, transportRequests: 0 };
  return {
    attempts: Math.max(evidence.attempt, evidence.ledger.length),
    transportRequests: evidence.ledger.reduce((sum, a) => sum + a.transportRequests, 0),
  };
}
