// A parked run's decisions, for every saga: the `decide` Update's validator refuses a decider who may not and a
// decision that does not fit before anything reaches history; one that needs a second person expires into a stop.
import { condition } from '@temporalio/workflow';
import {
  decisionAddress,
  decisionInputSchema,
  keyIdOf,
  SWEEPER,
  type DecisionInput,
  type DecisionRecord,
  type ParsedDecision,
} from '../../contract';
import type { DecisionPolicy } from '../../reliability/policy';
import type { DecisionKind, Role } from '../../reliability/policy-terms';
import { conditionTimeout } from './wait';
import { checkSignature, refuseMoved, refuseReplayed } from './signature-check';
import { zodProblems } from '../../domain/zod-problems';

/** A decision that chooses what the run does (approve and reject answer a proposal, which is chosen), but a retry. */
type Choice = Exclude<DecisionKind, 'retry-step' | 'approve' | 'reject'>;

/** The decision taken, or a proposal that expired: what the saga does next. */
export type Chosen<Step extends string = string> =
  | { kind: 'retry-step'; step: Step; record: DecisionRecord }
  | { [K in Choice | 'expired']: { kind: K; record: DecisionRecord } }[Choice | 'expired'];

/** Where the run waits: since when, and at which step it stopped (null: not known). */
export type Parking<Step extends string = string> = { failedStep: Step | null; since: string };

/** What the desk needs to know of the run to judge a decision. */
export interface DeskView<Step extends string = string> {
  /** Parked and waiting for a decision, or null. */
  parked: Parking<Step> | null;
  policy: () => DecisionPolicy;
  /** Why the decision does not fit the saga's state at this parking, or null when it does (who may take it is judged here). */
  refuses: (decision: ParsedDecision, parked: Parking<Step>) => string | null;
}

const ROLE_FOR: Record<DecisionKind, Role | null> = {
  reconcile: null,
  'retry-step': 'operator',
  compensate: 'operator',
  abandon: 'operator',
  'confirm-delivered': 'operator',
  approve: 'approver',
  reject: 'approver',
};

// Its own, not calls.ts's: step-failure.ts reads this module's types, and calls.ts reads step-failure.ts.
const now = () => new Date().toISOString(); // deterministic inside a workflow

/** How often the sweep may ask one run to reconcile. */
const SWEEP_INTERVAL_MS = 6 * 3600_000;

export class DecisionDesk<Step extends string = string> {
  readonly records: DecisionRecord[] = [];
  private pending: DecisionRecord | null = null;
  private chosen: Chosen<Step> | null = null;
  /** Why the run takes no more decisions (it is being cancelled), or null. */
  private closed: string | null = null;

  constructor(
    private readonly run: DeskView<Step>,
    private readonly addressee: { workflowId: string; runId: string },
  ) {}

  get awaitingApproval(): DecisionRecord | null {
    return this.pending;
  }

  /** Throws, naming the problem, for a decision that may not be taken now; nothing reaches history then. */
  validate(raw: DecisionInput): void {
    const parsed = decisionInputSchema.safeParse(raw);
    if (!parsed.success) throw new Error(`invalid decision: ${zodProblems(parsed.error, '(decision)')}`);
    if (this.closed) throw new Error(`the run takes no decision: ${this.closed}`);
    const d = parsed.data;
    const policy = this.run.policy();
    refuseReplayed(d, this.records);
    const { workflowId, runId } = this.addressee;
    const address = decisionAddress({ runId, parked: this.run.parked, decisions: this.records });
    // Before fits: a decision for a parking the run has left is judged against a state its decider never read.
    refuseMoved(d.answers, address);
    refuseMoved(d.signed?.answers, address);
    this.fits(d, policy);
    // Last: what the decision may be is said first; the signature then proves who took it, once, for this parking.
    const keyId = checkSignature(d, policy, { workflowId, address });
    const pending = this.pending;
    if (keyId && pending?.keyId === keyId && (d.decision === 'approve' || d.decision === 'reject'))
      throw new Error(
        `signed with the key that proposed ${pending.decision} (${keyId}); a second person's key must ${d.decision} it`,
      );
  }

  /** Whether the decider may take the decision, and the decision fits the run's state now. */
  private fits(d: ParsedDecision, policy: DecisionPolicy): void {
    const roles = policy.roles[d.by] ?? [];
    const role = ROLE_FOR[d.decision];
    if (role && !roles.includes(role)) {
      throw new Error(
        `${d.by} may not ${d.decision}: it takes the ${role} role, and ${d.by} has ${roles.length ? roles.join(', ') : 'none'}`,
      );
    }
    // A decision already taken holds until the run parks again: a second one would act on a state nobody reviewed.
    if (this.chosen) {
      const { kind, record } = this.chosen;
      throw new Error(
        `${record.decision} by ${record.by} ${kind === 'expired' ? `expired at ${record.expiresAt}; the run stops` : 'was already taken; the run is carrying it out'}`,
      );
    }
    if (d.decision === 'approve' || d.decision === 'reject') {
      if (!this.pending) throw new Error(`there is no decision waiting for approval`);
      if (Date.now() >= Date.parse(this.pending.expiresAt!))
        throw new Error(
          `${this.pending.decision} by ${this.pending.by} expired at ${this.pending.expiresAt}; it can no longer be answered`,
        );
      if (this.pending.by === d.by)
        throw new Error(`${d.by} proposed ${this.pending.decision}; a second person must ${d.decision} it`);
      return;
    }
    const parked = this.run.parked;
    if (!parked) throw new Error(`the run is not waiting for a decision`);
    if (this.pending)
      throw new Error(
        `${this.pending.decision} by ${this.pending.by} is waiting for approval; approve or reject it first`,
      );
    if (d.decision === 'reconcile' && d.by === SWEEPER) {
      // The sweep moves on to other runs: one it asked lately is left until the interval has passed.
      const last = this.records.filter((r) => r.by === SWEEPER).at(-1);
      if (last && Date.now() - Date.parse(last.at) < SWEEP_INTERVAL_MS)
        throw new Error(
          `the sweep asked at ${last.at}; it asks again after ${new Date(Date.parse(last.at) + SWEEP_INTERVAL_MS).toISOString()}`,
        );
    }
    const retry = d.decision === 'retry-step';
    if (retry && !parked.failedStep) throw new Error('the run did not stop at a step that can be retried');
    // The saga's word before the step's: a retry it refuses (one that would lead back to compensations) is refused as such.
    const why = this.run.refuses(d, parked);
    if (why) throw new Error(why);
    if (retry && (d.step ?? parked.failedStep) !== parked.failedStep)
      throw new Error(
        `only the step that failed, ${parked.failedStep}, can be retried; the steps before it keep their outputs`,
      );
  }

  /** Takes a validated decision. */
  apply(raw: DecisionInput): DecisionRecord {
    const d = decisionInputSchema.parse(raw);
    const policy = this.run.policy();
    // The contract names the refund's steps until a decision names any saga's (issue 35).
    const step =
      d.decision === 'retry-step' ? ((d.step ?? this.run.parked?.failedStep ?? null) as DecisionRecord['step']) : null;
    const key = d.signed && (policy as Partial<DecisionPolicy>).keys?.[d.by];
    const record: DecisionRecord = {
      seq: this.records.length + 1,
      decision: d.decision,
      by: d.by,
      reason: d.reason,
      step,
      at: now(),
      outcome: 'applied',
      expiresAt: null,
      answers: null,
      keyId: key ? keyIdOf(key) : null,
      nonce: d.signed?.nonce ?? null,
    };
    this.records.push(record);
    if (d.decision === 'approve' || d.decision === 'reject') {
      const proposal = this.pending!;
      record.answers = proposal.seq;
      proposal.outcome = d.decision === 'approve' ? 'approved' : 'rejected';
      this.pending = null;
      if (d.decision === 'approve') this.chosen = chosenOf<Step>(proposal);
      return record;
    }
    const needs = policy.needApproval.includes(step ? `retry-step:${step}` : d.decision);
    if (needs) {
      record.outcome = 'awaiting_approval';
      record.expiresAt = new Date(Date.now() + policy.approvalTtlMs).toISOString();
      this.pending = record;
    } else {
      this.chosen = chosenOf<Step>(record);
    }
    return record;
  }

  /** What the run carries out when `other` woke it: a decision already taken first, since its caller was told it applied. */
  firstOf<T>(other: T): Chosen<Step> | T {
    return this.chosen ?? other;
  }

  /** No decision is taken from now on: one accepted now would be reported applied and never carried out. */
  close(why: string): void {
    this.closed = why;
  }

  /** The run parked again: the decision it carried out is done, and a new one may be taken. */
  reopen(): void {
    this.chosen = null;
  }

  /** Waits for a decision to be taken (approved, where it needs approval); a proposal left unapproved expires into a stop. */
  async next(): Promise<Chosen<Step>> {
    for (;;) {
      await condition(() => this.chosen !== null || this.pending !== null);
      if (this.chosen) return this.chosen;
      const proposal = this.pending!;
      const answered = await condition(
        () => this.pending !== proposal,
        conditionTimeout(Date.parse(proposal.expiresAt!) - Date.now()),
      );
      if (!answered) {
        proposal.outcome = 'expired';
        this.pending = null;
        this.chosen = { kind: 'expired', record: proposal };
        return this.chosen;
      }
    }
  }
}

/** What a decision record chooses. */
function chosenOf<Step extends string>(record: DecisionRecord): Chosen<Step> {
  if (record.decision === 'retry-step') return { kind: 'retry-step', step: record.step! as Step, record };
  return { kind: record.decision as Choice, record };
}

/** A decision that moves the run on (abandon and expiry end it, as the harness does). */
export type Resumed<Step extends string> = Exclude<Chosen<Step>, { kind: 'abandon' | 'expired' }>;
