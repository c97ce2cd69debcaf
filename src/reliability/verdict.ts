// The recovery verdict for a run that stopped (seed 001): exactly one of three, with the single
// smallest next action and who may take it. Pure: the workflow shows it, `npm run inspect` too.
import type { DecisionPolicy } from './policy';

export const VERDICTS = ['auto-retry is safe', 'compensate, then resume', 'stop and hand to a person'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** What the operation's record holds of its sends: how many went out, how many are proven to have had no effect, and any receipt. */
export interface SendRecord {
  status: string;
  requestsSent: number;
  provenAbsentThrough: number | null;
  refund?: { refundId: string } | null;
}

export interface RecordedEffect {
  status: 'none' | 'unknown' | 'refunded' | 'partial' | 'failed';
  /** Why, in words for the run's reason and for `inspect`. */
  why: string;
}

/**
 * The refund's effect as the operation's record states it, over every send of every run: a receipt
 * says what it is; a send whose outcome is open (not proven to have had no effect) means a refund
 * may exist, whatever the last attempt said; only with every send settled was nothing refunded.
 */
export function effectOfRecord(op: SendRecord): RecordedEffect {
  if (op.refund) {
    const status = op.status === 'partial' || op.status === 'failed' ? op.status : 'refunded';
    return { status, why: `refund ${op.refund.refundId} is on the operation's record (${op.status})` };
  }
  const open = op.requestsSent - (op.provenAbsentThrough ?? 0);
  if (op.status === 'unknown' || open > 0) {
    return { status: 'unknown', why: `its record holds ${op.requestsSent} send(s), ${Math.max(open, 1)} not proven to have had no effect (status ${op.status}): a refund may exist` };
  }
  return { status: 'none', why: op.requestsSent ? `each of its ${op.requestsSent} send(s) is proven to have had no effect` : 'it was never sent' };
}

export interface VerdictFacts {
  effect: { status: string; certainty: string };
  failedStep: string | null;
  /** The failure that stopped it, when a step failed. */
  failure: { code: string; certainty: string } | null;
  quarantined: boolean;
  /** The refund did not go through and a finished step's compensation has not completed. */
  compensationPending: boolean;
  operationId: string | null;
  /** The customer notice's Message-ID, to look for in the mailbox. */
  noticeMessageId: string | null;
  /** An attempt of the failed step, not only the last, may have taken effect (its ledger says so). */
  earlierAttemptMayHaveTakenEffect?: boolean;
  /** The notice's correction is held: its hand-over is unknown, so the customer may or may not have it. */
  noticeHeld?: boolean;
  /** This run's retry-step on create_refund looks the refund up before any send (runs begun with the review's fixes). */
  retryLooksFirst: boolean;
}

export interface VerdictView {
  verdict: Verdict;
  nextAction: string;
  /** The decision that takes it (`retry-step:<step>` for a retry), then who may take it, and who must approve it when it needs a second person. */
  decision: string;
  decidedBy: string[];
  approvedBy: string[];
}

/** Failures that leave nothing behind and that a later attempt can fix (a decision gives the run a fresh budget). */
const RETRYABLE = new Set(['RATE_LIMIT', 'TRANSIENT_DEPENDENCY', 'CAPACITY', 'STATE_CONFLICT', 'BUDGET_EXCEEDED']);

/** What a retry-step of the refund does in a run, as its texts tell a person: it depends on the version the run began with. */
export function retryCreateText(looksFirst: boolean, step = 'create_refund'): string {
  return looksFirst
    ? `retry-step ${step}, which looks the refund up at the provider first and sends only if it is not there, or resends with the same key while the provider still deduplicates it`
    : `retry-step ${step}, which resends with the same key while the provider still deduplicates it, and otherwise looks the refund up first`;
}

export function verdictFor(facts: VerdictFacts, policy: DecisionPolicy): VerdictView {
  const holders = (role: 'operator' | 'approver') => Object.entries(policy.roles).filter(([, roles]) => roles.includes(role)).map(([name]) => name);
  const who = (decision: string) => ({ decision, decidedBy: holders('operator'), approvedBy: policy.needApproval.includes(decision) ? holders('approver') : [] });
  if (facts.quarantined && facts.compensationPending) {
    return {
      verdict: 'stop and hand to a person',
      nextAction: "a compensation's outcome is unknown: check it (the step table has its key; for an email, look for its Message-ID in the mailbox), then compensate, which resends it with the same key, or abandon",
      ...who('compensate'),
    };
  }
  if (facts.compensationPending && facts.noticeHeld) {
    return {
      verdict: 'compensate, then resume',
      nextAction:
        `look for ${facts.noticeMessageId ?? 'the customer notice'} in the mailbox first: if it is there, compensate sends the correction (and undoes what else stands); ` +
        'if not, the customer was told nothing: compensate would correct an email they never got, so abandon',
      ...who('compensate'),
    };
  }
  if (facts.compensationPending) {
    return { verdict: 'compensate, then resume', nextAction: 'compensate: undo the finished steps, each under its own key, since the refund did not go through', ...who('compensate') };
  }
  const step = facts.failedStep;
  const stop = (nextAction: string, decision = 'abandon') => ({ verdict: 'stop and hand to a person' as const, nextAction, ...who(decision) });
  if (facts.effect.status === 'unknown') {
    return stop(
      `reconcile operation ${facts.operationId ?? '(unknown)'} with the provider: the reconcile decision looks the refund up and sends nothing (the scheduled sweep asks for it too); ` +
        `found, the run finishes on its own. Still unknown after that: ${retryCreateText(facts.retryLooksFirst, step ?? 'create_refund')}, or abandon`,
      step === 'create_refund' || !step ? 'reconcile' : `retry-step:${step}`,
    );
  }
  if (facts.effect.status === 'partial') return stop('tell the customer what was refunded and abandon, or refund the rest under a new operation version');
  // Whatever failed last, a refund that may or may not stand is settled first: only then is a retry safe.
  // A notice any attempt of which may have been delivered (its record lost included) is looked for first.
  const noticeMayBeOut = step === 'notify_customer' && (facts.earlierAttemptMayHaveTakenEffect === true || facts.failure?.certainty === 'may_have_executed');
  if (step && facts.failure && facts.failure.certainty === 'not_executed' && RETRYABLE.has(facts.failure.code) && !facts.quarantined && !noticeMayBeOut) {
    return { verdict: 'auto-retry is safe', nextAction: `retry-step ${step}: it had no effect, and the earlier steps keep their outputs`, ...who(`retry-step:${step}`) };
  }
  if (noticeMayBeOut) {
    return stop(
      `look for ${facts.noticeMessageId ?? 'the notice'} in the mailbox: if it is there, confirm-delivered with what you found (the customer has it, and the run completes); ` +
        'if not, retry-step notify_customer, which resends it with the same Message-ID',
      'retry-step:notify_customer',
    );
  }
  if (facts.effect.status === 'failed') return stop('nothing was refunded: tell the customer, and abandon');
  return stop(step ? `fix what stopped ${step} (see its error), then retry-step ${step}; or abandon` : 'look at the evidence and abandon', step ? `retry-step:${step}` : 'abandon');
}
