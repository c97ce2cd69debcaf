// The recovery verdict: one of three, with the smallest next action and who may take it, from one pure function
// for the run as it parks and for `inspect`. Workflow code imports it too, so it imports only types.
import type { DecisionRecord } from '../contract/decision';
import type { DecisionPolicy } from './policy';

export type Verdict = 'auto-retry is safe' | 'compensate, then resume' | 'stop and hand to a person';

export interface VerdictFacts {
  effect: { status: string; certainty: string };
  failedStep: string | null;
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

/** What a retry-step of the refund does, as its texts tell a person. */
export function retryCreateText(step = 'create_refund'): string {
  return `retry-step ${step}, which looks the refund up at the provider first and sends only if it is not there, or resends with the same key while the provider still deduplicates it`;
}

/** A parked run's evidence for its verdict: its facts, and who may decide. Its state shows both, so `inspect` draws the same verdict. */
export interface ParkedEvidence {
  facts: VerdictFacts;
  deciders: ReturnType<typeof decidersOf>;
}

/**
 * Who may decide under a decision policy, by name: its operators and approvers, and the decisions that need a
 * second person (names as values, so the run's state masks them as it masks its verdict).
 */
export function decidersOf(policy: Pick<DecisionPolicy, 'roles' | 'needApproval'>) {
  const holders = (role: 'operator' | 'approver') =>
    Object.entries(policy.roles)
      .filter(([, roles]) => roles.includes(role))
      .map(([name]) => name);
  return { operators: holders('operator'), approvers: holders('approver'), needApproval: [...policy.needApproval] };
}

/**
 * The one verdict, over the evidence. A parked run's facts and who may decide give the verdict of those
 * facts (the refund run's own, as it parks); a run as `inspect` sees it gives what the evidence
 * contradicts first, then what the run says: for a parked run, the verdict of the facts it parked with.
 */
export function verdict(evidence: ParkedEvidence): VerdictView;
export function verdict(evidence: InspectedRun): InspectedVerdict;
export function verdict(evidence: ParkedEvidence | InspectedRun): InspectedVerdict {
  return 'execution' in evidence ? ofRun(evidence) : ofFacts(evidence);
}

function ofFacts({ facts, deciders }: ParkedEvidence): VerdictView {
  const say = (says: Verdict, nextAction: string, decision: string): VerdictView => ({
    verdict: says,
    nextAction,
    decision,
    decidedBy: deciders.operators,
    approvedBy: deciders.needApproval.includes(decision) ? deciders.approvers : [],
  });
  const stop = (nextAction: string, decision = 'abandon') => say('stop and hand to a person', nextAction, decision);
  if (facts.quarantined && facts.compensationPending)
    return stop(
      "a compensation's outcome is unknown: check it (the step table has its key; for an email, look for its Message-ID in the mailbox), then compensate, which resends it with the same key, or abandon",
      'compensate',
    );
  if (facts.compensationPending)
    return say(
      'compensate, then resume',
      facts.noticeHeld
        ? `look for ${facts.noticeMessageId ?? 'the customer notice'} in the mailbox first: if it is there, compensate sends the correction (and undoes what else stands); ` +
            'if not, the customer was told nothing: compensate would correct an email they never got, so abandon'
        : 'compensate: undo the finished steps, each under its own key, since the refund did not go through',
      'compensate',
    );
  const step = facts.failedStep;
  if (facts.effect.status === 'unknown')
    return stop(
      `reconcile operation ${facts.operationId ?? '(unknown)'} with the provider: the reconcile decision looks the refund up and sends nothing (the scheduled sweep asks for it too); ` +
        `found, the run finishes on its own. Still unknown after that: ${retryCreateText(step ?? 'create_refund')}, or abandon`,
      step === 'create_refund' || !step ? 'reconcile' : `retry-step:${step}`,
    );
  if (facts.effect.status === 'partial')
    return stop('tell the customer what was refunded and abandon, or refund the rest under a new operation version');
  // Whatever failed last, a refund that may or may not stand is settled first: only then is a retry safe.
  // A notice any attempt of which may have been delivered (its record lost included) is looked for first.
  const noticeMayBeOut =
    step === 'notify_customer' &&
    (facts.earlierAttemptMayHaveTakenEffect === true || facts.failure?.certainty === 'may_have_executed');
  if (
    step &&
    facts.failure &&
    facts.failure.certainty === 'not_executed' &&
    RETRYABLE.has(facts.failure.code) &&
    !facts.quarantined &&
    !noticeMayBeOut
  )
    return say(
      'auto-retry is safe',
      `retry-step ${step}: it had no effect, and the earlier steps keep their outputs`,
      `retry-step:${step}`,
    );
  if (noticeMayBeOut)
    return stop(
      `look for ${facts.noticeMessageId ?? 'the notice'} in the mailbox: if it is there, confirm-delivered with what you found (the customer has it, and the run completes); ` +
        'if not, retry-step notify_customer, which resends it with the same Message-ID',
      'retry-step:notify_customer',
    );
  if (facts.effect.status === 'failed') return stop('nothing was refunded: tell the customer, and abandon');
  return stop(
    step
      ? `fix what stopped ${step} (see its error), then retry-step ${step}; or abandon`
      : 'look at the evidence and abandon',
    step ? `retry-step:${step}` : 'abandon',
  );
}

/** What the facts say of one effect: confirmed by the facts it names, to be confirmed where there are none, or contradicted. */
export interface Inference {
  claim: string;
  status: 'confirmed' | 'to be confirmed' | 'contradicted';
  basis: string[];
  /** For one to be confirmed: how to confirm it. */
  check?: string;
}

/**
 * What `inspect` knows of a run, for its verdict: Temporal's view, the run's own state and result
 * (shaped as RefundRunState and RefundResult), and the inferences drawn from the evidence.
 */
export interface InspectedRun {
  execution: string;
  state: {
    status: string;
    /** The run's own verdict, and the evidence it drew it from (a worker of earlier code shows only the verdict). */
    parked: (VerdictView & Partial<ParkedEvidence>) | null;
    decisions: Pick<DecisionRecord, 'outcome' | 'decision' | 'step' | 'by' | 'reason' | 'expiresAt'>[];
    steps: { name: string; status: string }[];
    outcome: { reason: string } | null;
  } | null;
  result: { status: string; reason?: string; orderId?: string | null; operationId?: string | null } | null;
  failure: string | null;
  inferences: Inference[];
  parkedVerdict: string | null;
  orderId: string | null;
  version: number | undefined;
  /** The run completed, and the provider failed its refund afterwards: what its follow-up did, if one ran. */
  failedLater?: { followUp: { workflowId: string; status: string; reason: string } | null };
}

/** A verdict as `inspect` gives it: its decision is null when no decision is needed. */
export type InspectedVerdict = Omit<VerdictView, 'decision'> & { decision: string | null };

function ofRun(v: InspectedRun): InspectedVerdict {
  const none = { decision: null, decidedBy: [], approvedBy: [] };
  const say = (says: Verdict, nextAction: string): InspectedVerdict => ({ verdict: says, nextAction, ...none });
  const person = (nextAction: string) => say('stop and hand to a person', nextAction);
  const contradicted = v.inferences.find((i) => i.status === 'contradicted');
  if (contradicted)
    return person(
      `investigate before anything else: the evidence contradicts "${contradicted.claim}" (${contradicted.basis.join(', ')})`,
    );

  const shown = v.state?.parked;
  if (v.execution === 'RUNNING' && shown) {
    const parked = shown.facts && shown.deciders ? ofFacts({ facts: shown.facts, deciders: shown.deciders }) : shown;
    const pending = v.state!.decisions.find((d) => d.outcome === 'awaiting_approval');
    if (pending)
      return {
        verdict: parked.verdict,
        nextAction: `approve or reject ${pending.decision}${pending.step ? ` ${pending.step}` : ''} proposed by ${pending.by} ("${pending.reason}"); unanswered, it expires at ${pending.expiresAt} and the run stops`,
        decision: 'approve',
        decidedBy: parked.approvedBy,
        approvedBy: [],
      };
    const { verdict: says, nextAction, decision, decidedBy, approvedBy } = parked;
    return { verdict: says, nextAction, decision, decidedBy, approvedBy };
  }
  if (v.execution === 'RUNNING' && !v.state && v.parkedVerdict)
    return say(v.parkedVerdict as Verdict, 'start a worker (`npm start`) to read the step table and the next action');
  if (v.execution === 'RUNNING' && !v.state)
    return say(
      'auto-retry is safe',
      'start a worker (`npm start`): no worker polls, and the run continues where it stopped once one does; it reconciles before it resends anything',
    );
  if (v.execution === 'RUNNING') {
    const at = v.state?.steps.find((s) => s.status === 'running')?.name;
    return say(
      'auto-retry is safe',
      `none: the run is ${v.state?.status ?? 'running'}${at ? ` at ${at}` : ''}, retrying and reconciling on its own within its budget`,
    );
  }
  if (v.failedLater) {
    const f = v.failedLater.followUp;
    if (!f)
      return person(
        "the provider failed this refund after the run completed, and no follow-up has undone the order update and the email: check the receiver and the operation's audit trail",
      );
    if (f.status === 'compensated')
      return say(
        'compensate, then resume',
        `none left to compensate: the provider failed the refund after this run completed, and ${f.workflowId} compensated it (${f.reason}); to refund again, start a new operation version`,
      );
    return person(
      `the provider failed the refund after this run completed; ${f.workflowId} ended ${f.status}: ${f.reason}`,
    );
  }
  const reason = v.result?.reason;
  const newVersion =
    v.orderId && v.version ? ` (npm run refund -- --order ${v.orderId} --operation-version ${v.version + 1} …)` : '';
  // A run cancelled once its compensations all completed ended compensated, though Temporal says Cancelled;
  // a follow-up's result (compensated, unchanged, needs_attention) reads the same way.
  const ended: string | undefined =
    v.execution === 'COMPLETED' ? v.result?.status : v.state?.status === 'compensated' ? 'compensated' : undefined;
  if (ended) {
    switch (ended) {
      case 'completed':
        return say(
          'auto-retry is safe',
          'none: every effect is confirmed; the same request again returns this result and repeats no effect',
        );
      case 'rejected':
        return say(
          'auto-retry is safe',
          `none: nothing was done (${reason ?? 'refused'}); a corrected request is a new operation version${newVersion}`,
        );
      case 'unchanged':
        return say('auto-retry is safe', `none: ${reason ?? 'the provider says the refund stands'}`);
      case 'compensated':
        return say(
          'compensate, then resume',
          `none left to compensate: every finished step was compensated under its own key; to refund again, start a new operation version${newVersion}`,
        );
      default:
        return person(
          `a person has it: the run ${ended} (${v.state?.outcome?.reason ?? reason ?? ''}); confirm the inferences above by hand`,
        );
    }
  }
  const why = v.state?.outcome?.reason ?? v.failure ?? 'no reason recorded';
  return person(
    `the run ended ${v.execution} (${why}): settle what the inferences leave to be confirmed by hand; a remainder is a new operation version${newVersion}`,
  );
}
