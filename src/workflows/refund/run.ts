// One refund run's state and its moves between states: what it knows (the step table, the
// operation, the effect, the last failure), parking for a person and moving on, and ending. Its
// activity calls, provider events, decisions and visibility are each a piece of their own.
import { patched, workflowInfo } from '@temporalio/workflow';
import type { RefundActivities } from '../../activities';
import { REFUND_SAGA, REFUND_STEPS, type RefundStep, type SagaContext } from '../../compensations/registry';
import type {
  AwaitingProvider,
  BeginResult,
  RefundRunState,
  RunSettings,
  RunStatus,
  TerminalStatus,
} from '../../contract';
import { DEFAULT_POLICY } from '../../reliability/default-policy';
import { mayHaveTakenEffect } from '../../reliability/attempt-ledger';
import { redact } from '../../reliability/redaction';
import { ruleFor, type DecisionPolicy, type RecoveryPolicy } from '../../reliability/policy';
import type { Boundary, Certainty } from '../../reliability/taxonomy';
import { decidersOf, verdict, type ParkedEvidence } from '../../reliability/verdict';
import type { RefundRequest } from '../../domain/refund-request';
import { IgnoredMessages } from '../../saga/workflow/messages';
import type { StepError } from '../../saga/workflow/step-failure';
import { ActivityCalls } from '../../saga/workflow/calls';
import { type Chosen, DecisionDesk, type DeskView } from '../../saga/workflow/desk';
import { refundRefusals } from './decisions';
import { OperationView } from './operation';
import { ProviderNews } from './provider-news';
import { RunBudget } from '../../saga/workflow/budget';
import { RunStopped } from '../../saga/workflow/run-stopped';
import { StepRunner } from '../../saga/workflow/step-runner';
import { flagForAttention, showEnded, showParked, showStarted, showStatus, showUnparked } from './visibility';

const now = () => new Date().toISOString();
/** A failed step's effect nobody knows: it may have happened, or what came back cannot tell. */
const UNKNOWN_CERTAINTIES: ReadonlySet<string> = new Set<Certainty>(['may_have_executed', 'undeterminable']);

export class RefundRun {
  readonly workflowId = workflowInfo().workflowId;
  readonly steps = new StepRunner(REFUND_STEPS);
  readonly budget = new RunBudget(DEFAULT_POLICY.budget, workflowInfo().runStartTime.getTime());
  readonly calls = new ActivityCalls<RefundActivities, RefundStep>(
    this.budget,
    this.steps,
    () => this.policy,
    (step, boundary, error) => this.remember(step, boundary, error),
  );
  readonly ctx: SagaContext;
  readonly operation = new OperationView();
  readonly news = new ProviderNews();
  /** Signals it did not take, for operators. */
  readonly ignored = new IgnoredMessages();
  settings: RunSettings | null = null;
  /** What loading the order returned: the operation, the order (masked), earlier operations, the settings. */
  begin: BeginResult | null = null;
  status: RunStatus = 'running';
  effect: RefundRunState['effect'] = { status: 'none', certainty: 'none', refundId: null };
  lastFailure: RefundRunState['lastFailure'] = null;
  recovery: RefundRunState['recovery'] = null;
  reconciliation: RefundRunState['reconciliation'] = {
    lookups: 0,
    lastResult: null,
    lastAt: null,
    cursor: null,
    resubmissions: 0,
    history: [],
  };
  outcome: RefundRunState['outcome'] = null;
  awaitingProvider: AwaitingProvider | null = null;
  parked: RefundRunState['parked'] = null;
  /** Between a stop and its wait for a decision, and between a decision and carrying it out: where 1.0 did not. */
  inBookkeeping = false;
  private readonly deskView: DeskView<RefundStep> = {
    parked: null,
    policy: () => this.decisionPolicy,
    refuses: refundRefusals({
      effect: () => this.effect.status,
      cannotCompensate: () => this.cannotCompensate(),
      outcomeUnknown: (step) => UNKNOWN_CERTAINTIES.has(this.steps.get(step).error?.certainty ?? 'none'),
    }),
  };
  /** Who may decide, read from the workers when the run parks; until then, the run's policy. */
  private workerDecisions: DecisionPolicy | undefined;
  readonly desk = new DecisionDesk<RefundStep>(this.deskView, {
    workflowId: this.workflowId,
    runId: workflowInfo().runId,
  });

  constructor(readonly request: RefundRequest) {
    this.ctx = { request, operationId: '' };
    showStarted(this, request.orderId);
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

  view(): RefundRunState {
    return redact({
      workflowId: this.workflowId,
      runId: workflowInfo().runId,
      request: this.request,
      status: this.status,
      operation: this.operation.identity,
      effect: this.effect,
      provider: { name: 'stripe' as const, scope: this.settings?.scope ?? null, changed: false as const },
      lastFailure: this.lastFailure,
      recovery: this.recovery,
      reconciliation: this.reconciliation,
      budget: this.budget.view(),
      outcome: this.outcome,
      parked: this.parked,
      decisions: this.desk.records,
      providerEvents: this.news.events,
      ignoredMessages: this.ignored.view,
      awaitingProvider: this.awaitingProvider,
      steps: this.steps.table(),
    });
  }

  /** Parks the run: it stays Running, with its finished steps and their outputs, waiting for a decision, with its verdict and next action and what they are drawn from (so `inspect` draws the same). */
  park(stopped: RunStopped<RefundStep>): void {
    const failure = stopped.failedStep ? this.steps.get(stopped.failedStep).error : undefined;
    const notice = this.steps.get('notify_customer');
    const messageId =
      notice.error?.provider.messageId ?? (notice.output as { messageId?: unknown } | undefined)?.messageId;
    const evidence: ParkedEvidence = {
      facts: {
        effect: this.effect,
        failedStep: stopped.failedStep,
        failure: failure ? { code: failure.code, certainty: failure.certainty } : null,
        quarantined: stopped.quarantined,
        compensationPending: this.cannotCompensate() === null,
        operationId: this.ctx.operationId || null,
        noticeMessageId: typeof messageId === 'string' ? messageId : null,
        noticeHeld: notice.compensation?.status === 'held',
        ...(stopped.failedStep && {
          earlierAttemptMayHaveTakenEffect: this.steps.get(stopped.failedStep).ledger.some(mayHaveTakenEffect),
        }),
      },
      deciders: decidersOf(this.decisionPolicy),
    };
    const view = verdict(evidence);
    this.outcome = {
      status: 'needs_attention',
      failedStep: stopped.failedStep,
      reason: stopped.reason,
      quarantined: stopped.quarantined,
    };
    this.parked = { since: now(), failedStep: stopped.failedStep, reason: stopped.reason, ...view, ...evidence };
    this.deskView.parked = { failedStep: stopped.failedStep, since: this.parked.since };
    this.desk.reopen();
    this.status = 'needs_attention';
    showParked(this, stopped.failedStep, this.effect.status, view.verdict);
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
    showUnparked(this);
    this.budget.renew(Date.now());
  }

  /** The run's final word, with what is known of the refund; nothing about it needs a person any more. */
  end(
    status: Exclude<TerminalStatus, 'needs_attention' | 'completed'>,
    reason: string,
    failedStep: RefundStep | null,
  ): void {
    this.outcome = { status, failedStep, reason, quarantined: false };
    this.status = status;
    showEnded(this, status, failedStep, this.effect.status);
  }

  finish(status: TerminalStatus, reason: string, failedStep: RefundStep | null, quarantined = false): void {
    this.outcome = { status, failedStep, reason, quarantined };
    this.setStatus(status, failedStep ?? 'completion_gate');
  }

  /** A run that ended with work left for a person (cancelled mid-saga) is still among the runs that need one. */
  flagForAttention(): void {
    flagForAttention(this, this.effect.status);
  }

  stop(status: RunStopped['status'], reason: string, failedStep: RefundStep | null, quarantined = false): never {
    throw new RunStopped(status, reason, failedStep, quarantined);
  }

  /** Moves the run to a new status; a transition an operator may search for is mirrored to the search attributes. */
  setStatus(status: RunStatus, step?: string): void {
    if (status === this.status) return;
    this.status = status;
    showStatus(this, status, step);
  }

  /** Whether the run, ending now, leaves a person something to settle: a refund that stands or may stand with its saga unfinished, or an open compensation. */
  leavesWorkBehind(): boolean {
    const sent = this.effect.status !== 'none' || this.steps.get('create_refund').status !== 'pending';
    if (!sent) return false;
    return !(this.effect.status === 'failed' && this.cannotCompensate() !== null);
  }

  /**
   * Why compensating now would be wrong, or null when it is what the run needs: only when the refund
   * did not go through (or never left) and a finished step's registered compensation has not completed.
   */
  cannotCompensate(): string | null {
    if (this.effect.status !== 'failed' && this.effect.status !== 'none') {
      return `the refund is ${this.effect.status}: it stands or may stand, so the order and the email tell the truth`;
    }
    const open = this.steps
      .completed()
      .filter(
        (step) =>
          REFUND_SAGA[step].undo.kind === 'compensation' && this.steps.get(step).compensation?.status !== 'completed',
      );
    // A correction held back (a notice whose hand-over is unknown) is one a person's compensate decision sends.
    const held = REFUND_STEPS.filter((step) => this.steps.get(step).compensation?.status === 'held');
    return open.length || held.length ? null : 'no finished step has a compensation left to run';
  }

  /** Keeps a failure and the move the policy prescribes for it. */
  remember(step: string, boundary: Boundary, error: StepError): void {
    this.lastFailure = { step, ...error };
    // Facts from a failure a test or an older worker shaped may be missing: the record then stays as last read.
    const { operationStatus, requestsSent, provenAbsentThrough } = error.provider ?? {};
    if (typeof operationStatus === 'string' && typeof requestsSent === 'number') {
      this.operation.note({
        status: operationStatus,
        requestsSent,
        provenAbsentThrough: typeof provenAbsentThrough === 'number' ? provenAbsentThrough : null,
      });
    }
    const rule = ruleFor(this.policy, error.code, error.certainty, boundary);
    this.recovery = { action: rule.action, owner: rule.owner, note: rule.note ?? null };
  }

  /**
   * Whether a cancellation that lands in the park's bookkeeping takes the cancellation path: 1.0 histories, which let
   * it close the run, replay as they ran. Asked only there, so a run that is not cancelled carries no patch marker:
   * the workflow task that asks is the cancel's own, which runs no local activity before it (see wait.ts).
   */
  cancelsAnywhere(): boolean {
    return patched('cancel-anywhere');
  }

  /** A decision taken while parked that the run has not yet carried out (it has not moved on since). */
  takenDecision(): Chosen<RefundStep> | null {
    return this.parked ? this.desk.firstOf(null) : null;
  }

  /** The provider's word that the refund failed, not acted on (see ProviderNews). */
  unactedFailure() {
    return this.news.unactedFailure(this.effect);
  }
}
