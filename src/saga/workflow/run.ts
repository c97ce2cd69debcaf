// A saga run's state, with one owner: its steps, budget, calls, decisions, status and outcome, and the moves between
// them. A saga adds what it knows of its own effect, whether compensating fits, and the state its Query returns.
import { workflowInfo } from '@temporalio/workflow';
import {
  type ParsedDecision,
  type PinnedSettings,
  type RunSettings,
  type RunState,
  type RunStatus,
  stepKey,
  type TerminalStatus,
} from '../../contract';
import { mayHaveTakenEffect } from '../../reliability/attempt-ledger';
import { DEFAULT_POLICY } from '../../reliability/default-policy';
import { pinnedPolicy } from '../../reliability/pinned-policy';
import { ruleFor, type DecisionPolicy, type RecoveryPolicy } from '../../reliability/policy';
import { redact } from '../../reliability/redaction';
import { type Boundary, type Certainty, outcomeUnknown } from '../../reliability/taxonomy';
import { decidersOf, verdict, type ParkedEvidence, type Verdict, type VerdictFacts } from '../../reliability/verdict';
import { RunBudget } from './budget';
import { type Activities, ActivityCalls } from './calls';
import { now, StepRunner } from './step-runner';
import { type Chosen, DecisionDesk, type DeskView } from './desk';
import { IgnoredMessages } from './messages';
import type { Stopped } from './run-stopped';
import type { StepError } from './step-failure';
import type { Found } from './reconciled-send';
import { isUndone, type PlannedUndo } from './undo';
import { type Shows, Visibility } from './visibility';

export type Ending = Exclude<TerminalStatus, 'needs_attention' | 'completed'>;
/** The run's fields as its Query shows them. */
type Shown<Step extends string> = RunState<unknown, Step>;

/** What a saga's run is made of: its steps, its rules on decisions, how it shows, its state as its Query returns it. */
export interface RunParts<Step extends string, State> {
  steps: readonly Step[];
  /** The saga's rules on decisions; a run's own `refusal` if not said. */
  refuses?: DeskView<Step>['refuses'];
  shows: Shows<State>;
}

/** Any saga's run, as the harness reads and moves it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type SagaRun<Step extends string, State = unknown> = SagaRunState<Step, State, any>;

export abstract class SagaRunState<Step extends string, State, Acts extends Activities> {
  readonly workflowId = workflowInfo().workflowId;
  readonly steps: StepRunner<Step>;
  readonly budget = new RunBudget(DEFAULT_POLICY.budget, workflowInfo().runStartTime.getTime());
  readonly calls: ActivityCalls<Acts, Step>;
  /** Signals it did not take, for operators. */
  readonly ignored = new IgnoredMessages();
  settings: RunSettings | null = null;
  status: RunStatus = 'running';
  lastFailure: Shown<Step>['lastFailure'] = null;
  recovery: Shown<Step>['recovery'] = null;
  outcome: Shown<Step>['outcome'] = null;
  parked: Shown<Step>['parked'] = null;
  /** Between a stop and its wait for a decision, and between a decision and carrying it out: where 1.0 did not. */
  inBookkeeping = false;
  readonly desk: DecisionDesk<Step>;
  protected readonly show: Visibility<State>;
  private readonly deskView: DeskView<Step>;
  /** Who may decide, read from the workers when the run parks; until then, the run's policy. */
  private workerDecisions: DecisionPolicy | undefined;

  constructor(parts: RunParts<Step, State>) {
    this.steps = new StepRunner(parts.steps);
    this.calls = new ActivityCalls<Acts, Step>(
      this.budget,
      this.steps,
      () => this.policy,
      (step, boundary, error) => this.remember(step, boundary, error),
      (settings) => this.pin(settings),
    );
    const refuses = parts.refuses ?? ((d) => this.refusal(d));
    this.deskView = { parked: null, policy: () => this.decisionPolicy, refuses };
    this.desk = new DecisionDesk<Step>(this.deskView, { workflowId: this.workflowId, runId: workflowInfo().runId });
    this.show = new Visibility(parts.shows, () => this.state());
  }

  /** What the run was asked to do. */
  abstract readonly request: unknown;
  /** The operation whose audit trail the run writes (empty until the saga commits its intent). */
  abstract get operationId(): string;
  /** The run's state, unmasked: what leaves the run (its Query) is `view()`, and its page's details mask their own text. */
  abstract state(): State;

  /** The run's state as operators see it: customer addresses masked. */
  view(): State {
    return redact(this.state());
  }
  /** What is known of the saga's effect at its provider (the refund, the charge). */
  abstract effect: { status: string; certainty: Certainty | 'none' };
  /** The customer email a person may look for in the mailbox, for the verdict's facts. */
  protected abstract noticeFacts(): Pick<VerdictFacts, 'noticeMessageId' | 'noticeHeld'>;
  /** What the saga calls its effect, in what a person reads: "charge", "refund". */
  abstract readonly effectName: string;

  /** The step's key: what it sends under, and what its records at the store and the provider are found by. */
  key(step: Step): string {
    return stepKey(this.operationId, step);
  }

  /** Whether the step may have taken effect: done, still running (a cancel can land meanwhile), or failed unknown. */
  mayHaveTaken(step: Step): boolean {
    const r = this.steps.get(step);
    return r.status === 'completed' || r.status === 'running' || outcomeUnknown(r.error?.certainty);
  }

  /** What stands to be undone, latest first, each under its own key, for a saga that plans from its own state. */
  undoPlan(_resendApprovedAt?: string): PlannedUndo<Step>[] {
    return [];
  }

  /** The steps whose undo has not completed, latest first. */
  openUndos(): Step[] {
    return this.undoPlan()
      .filter((p) => !isUndone(this, p))
      .map((p) => p.step);
  }

  /** Its send is settled by its receipt, proven absent, or unknown: what that means for the saga's effect. */
  noteSend(_found: Found<unknown>): void {}

  /** Why compensating now would be wrong, or null when it is what the run needs. */
  cannotCompensate(): string | null {
    if (this.effect.status === 'unknown') return `the ${this.effectName} is unknown: reconcile it first`;
    return this.openUndos().length ? null : 'nothing of the run stands';
  }

  /** Whether undoing is owed, not only possible: begun and not finished, for a saga that undoes from its own state. */
  protected compensationOwed(): boolean {
    return this.steps.table().some((s) => s.compensation) && this.openUndos().length > 0;
  }

  /** Whether the run, ending now, leaves a person something to settle. */
  leavesWorkBehind(): boolean {
    return this.effect.status === 'unknown' || this.openUndos().length > 0;
  }

  /** The decisions that fit a run that undoes from its own state, and takes no person's word for a delivery. */
  protected refusal(d: ParsedDecision): string | null {
    if (d.decision === 'reconcile' && this.effect.status !== 'unknown')
      return `nothing to reconcile: the ${this.effectName} is ${this.effect.status}`;
    if (d.decision === 'compensate')
      return this.cannotCompensate() && `nothing to compensate: ${this.cannotCompensate()}`;
    // Once undoing has begun, going forward would complete a run whose effects are being given back.
    if (d.decision === 'retry-step' && this.steps.table().some((s) => s.compensation))
      return 'its compensation has begun: compensate finishes it, or abandon';
    if (d.decision === 'confirm-delivered')
      return 'it takes no confirm-delivered: its emails are settled through the message log, or resent by retry-step';
    return null;
  }

  /** What every saga's state shows of its run, as the steps Query returns it (the saga adds its request and effect). */
  protected runView() {
    return {
      workflowId: this.workflowId,
      runId: workflowInfo().runId,
      status: this.status,
      lastFailure: this.lastFailure,
      recovery: this.recovery,
      budget: this.budget.view(),
      outcome: this.outcome,
      parked: this.parked,
      decisions: this.desk.records,
      ignoredMessages: this.ignored.view,
      steps: this.steps.table(),
    };
  }

  /** Takes the worker's settings as the run's history pins them (from each step receipt that carries them): its policy and budgets from now on. */
  private pin(settings: PinnedSettings): RecoveryPolicy {
    const policy = pinnedPolicy(settings);
    this.settings = { scope: settings.scope, provider: settings.provider, policy };
    this.budget.adopt(policy.budget);
    return policy;
  }

  get policy(): RecoveryPolicy {
    return this.settings?.policy ?? DEFAULT_POLICY;
  }

  get decisionPolicy(): DecisionPolicy {
    return this.workerDecisions ?? this.policy.decisions;
  }

  useDecisionPolicy(decisions: DecisionPolicy): void {
    this.workerDecisions = decisions;
  }

  /** Parks the run: it stays Running, with its finished steps and their outputs, waiting for a decision, with its verdict and what it is drawn from (so `inspect` draws the same). */
  park(stopped: Stopped<Step>): Verdict {
    const evidence: ParkedEvidence = { facts: this.facts(stopped), deciders: decidersOf(this.decisionPolicy) };
    const view = verdict(evidence);
    const { failedStep, reason, quarantined } = stopped;
    this.outcome = { status: 'needs_attention', failedStep, reason, quarantined };
    this.parked = { since: now(), failedStep, reason, ...view, ...evidence };
    this.deskView.parked = { failedStep, since: this.parked.since };
    this.desk.reopen();
    this.status = 'needs_attention';
    this.show.parked(failedStep, this.effect.status, view.verdict);
    return view.verdict;
  }

  /** The facts a parked run's verdict is drawn from (so `inspect` draws the same). */
  private facts({ failedStep, quarantined }: Stopped<Step>): VerdictFacts {
    const failure = failedStep ? this.steps.get(failedStep).error : undefined;
    return {
      effect: this.effect,
      failedStep,
      failure: failure ? { code: failure.code, certainty: failure.certainty } : null,
      quarantined,
      compensationPending: this.compensationOwed(),
      operationId: this.operationId || null,
      ...this.noticeFacts(),
      // Whether an earlier attempt of the step that stopped the run, not only its last, may have taken effect.
      ...(failedStep && {
        earlierAttemptMayHaveTakenEffect: this.steps.get(failedStep).ledger.some(mayHaveTakenEffect),
      }),
    };
  }

  /** While parked, a proposal waiting for a second person shows as awaiting_approval; answered, the run is back to needs_attention until it moves on. */
  noteDecision(): void {
    if (!this.parked) return;
    this.setStatus(this.desk.awaitingApproval ? 'awaiting_approval' : 'needs_attention');
  }

  /** A decision was taken: the run moves on with a fresh budget, no longer among those that need a person. */
  unpark(): void {
    this.parked = null;
    this.deskView.parked = null;
    this.outcome = null;
    this.status = 'running';
    this.show.unparked();
    this.budget.renew(Date.now());
  }

  /** The run's final word; nothing about it needs a person any more. */
  end(status: Ending, reason: string, failedStep: Step | null): void {
    this.outcome = { status, failedStep, reason, quarantined: false };
    this.status = status;
    this.show.ended(status, failedStep, this.effect.status);
  }

  finish(status: TerminalStatus, reason: string, failedStep: Step | null): void {
    this.outcome = { status, failedStep, reason, quarantined: false };
    this.setStatus(status, failedStep ?? this.steps.last);
  }

  /** A run that ended with work left for a person (cancelled mid-saga) is still among the runs that need one. */
  flagForAttention(): void {
    this.show.flagged(this.effect.status, this.status === 'needs_attention');
  }

  /** Moves the run to a new status; a transition an operator may search for is mirrored to the search attributes. */
  setStatus(status: RunStatus, step?: string): void {
    if (status === this.status) return;
    this.status = status;
    this.show.status(status, step);
  }

  /** Keeps a failure and the move the policy prescribes for it. */
  remember(step: string, boundary: Boundary, error: StepError): void {
    this.lastFailure = { step, ...error };
    const rule = ruleFor(this.policy, error.code, error.certainty, boundary);
    this.recovery = { action: rule.action, owner: rule.owner, note: rule.note ?? null };
  }

  /** A decision taken while parked that the run has not yet carried out (it has not moved on since). */
  takenDecision(): Chosen<Step> | null {
    return this.parked ? this.desk.firstOf(null) : null;
  }
}
