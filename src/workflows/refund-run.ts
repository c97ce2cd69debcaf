// The state of one refund run, as the `steps` Query shows it: the step table, the operation's
// identity, what is known of the effect, the last failure and the move the policy chose for it,
// reconciliation, budgets, and why the run stopped. Workflow code: deterministic, no I/O.
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { pooledActivities } from './pools';
import type { z } from 'zod';
import type { RefundActivities } from '../activities';
import { REFUND_SAGA, REFUND_STEPS, type RefundStep, type SagaContext } from '../compensations/registry';
import {
  SEARCH_ATTRIBUTES,
  type AwaitingProvider,
  type BeginResult,
  type Evidenced,
  type ProviderEventSummary,
  type ReconcileOutcome,
  type RefundRunState,
  type RunSettings,
  type RunStatus,
  type StepError,
  type StepRecord,
  type TerminalStatus,
} from '../contract';
import { lifecycleRank } from '../domain/order';
import type { RefundRequest } from '../domain/refund-request';
import { DEFAULT_POLICY } from '../reliability/default-policy';
import { mayHaveTakenEffect, redact, tally } from '../reliability/evidence';
import { IgnoredMessages } from './messages';
import { furthestEvent, MAX_PROVIDER_EVENTS } from './provider-events';
import { decide, type DecisionPolicy, type RecoveryPolicy, type RecoveryRule } from '../reliability/policy';
import type { Boundary, Certainty } from '../reliability/taxonomy';
import { BudgetExhausted, RunBudget } from './run-budget';
import { DecisionDesk, type DeskView } from './decisions';
import { describeFailure, StepFailedError, stepError, StepRunner } from './step-runner';
import { effectOfRecord, verdictFor, type RecordedEffect, type SendRecord } from '../reliability/verdict';
import { isPatched, reviewFixes, WHOLE_ATTEMPTS } from './versions';

/** Thrown inside the saga to end the run with a verdict; caught once, at the top. */
export class RunStopped extends Error {
  constructor(
    readonly status: Exclude<TerminalStatus, 'completed'>,
    readonly reason: string,
    readonly failedStep: RefundStep | null,
    readonly quarantined = false,
  ) {
    super(reason);
  }
}

const now = () => new Date().toISOString();

/** A failed step's effect nobody knows: it may have happened, or what came back cannot tell. */
const UNKNOWN_CERTAINTIES: ReadonlySet<string> = new Set<Certainty>(['may_have_executed', 'undeterminable']);

export class RefundRun {
  readonly workflowId = workflowInfo().workflowId;
  readonly steps = new StepRunner(REFUND_STEPS);
  readonly budget: RunBudget;
  readonly ctx: SagaContext;
  settings: RunSettings | null = null;
  /** What loading the order returned: the operation, the order (masked), earlier operations, the settings. */
  begin: BeginResult | null = null;
  status: RunStatus = 'running';
  operation: RefundRunState['operation'] = null;
  effect: RefundRunState['effect'] = { status: 'none', certainty: 'none', refundId: null };
  lastFailure: RefundRunState['lastFailure'] = null;
  recovery: RefundRunState['recovery'] = null;
  reconciliation: RefundRunState['reconciliation'] = { lookups: 0, lastResult: null, lastAt: null, cursor: null, resubmissions: 0, history: [] };
  outcome: RefundRunState['outcome'] = null;
  awaitingProvider: AwaitingProvider | null = null;
  parked: RefundRunState['parked'] = null;
  private readonly deskView: DeskView = {
    parked: null,
    effect: () => this.effect.status,
    cannotCompensate: () => this.cannotCompensate(),
    outcomeUnknown: (step) => UNKNOWN_CERTAINTIES.has(this.steps.get(step).error?.certainty ?? 'none'),
    policy: () => this.decisionPolicy,
  };
  /** Who may decide, read from the workers when the run parks; until then, the run's policy. */
  private workerDecisions: DecisionPolicy | undefined;
  readonly desk = new DecisionDesk(this.deskView);
  /** How much of each step's ledger the budget has already been charged for. */
  private readonly paid = new Map<string, number>();

  constructor(readonly request: RefundRequest) {
    this.ctx = { request, operationId: '' };
    const { runStartTime, typedSearchAttributes: started } = workflowInfo();
    this.budget = new RunBudget(DEFAULT_POLICY.budget, runStartTime.getTime());
    // startRefund starts a run with both already set (in its started event, so a replay decides the same):
    // the upsert, an event and a visibility write, is left to runs started another way (the temporal CLI, a batch).
    if (started.get(SEARCH_ATTRIBUTES.orderId) !== request.orderId || started.get(SEARCH_ATTRIBUTES.status) !== 'running') {
      upsertSearchAttributes([
        { key: SEARCH_ATTRIBUTES.orderId, value: request.orderId },
        { key: SEARCH_ATTRIBUTES.status, value: 'running' },
      ]);
    }
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

  /** Provider events received for this run, in arrival order, each once. */
  readonly providerEvents: ProviderEventSummary[] = [];

  /** Signals it did not take, for operators. */
  readonly ignored = new IgnoredMessages();

  /** Failure events the run already took to the provider while parked: each is looked into once. */
  readonly checkedFailures = new Set<string>();

  /**
   * The provider's signed word that the run's refund failed (or was canceled), while the run still
   * holds it as standing: news the run must act on, or hand to the follow-up when it ends.
   */
  unactedFailure(): ProviderEventSummary | undefined {
    const refundId = this.effect.refundId;
    if (!refundId || (this.effect.status !== 'refunded' && this.effect.status !== 'partial')) return undefined;
    const e = furthestEvent(this.providerEvents, refundId);
    return e && lifecycleRank(e.refundStatus) === 2 ? e : undefined;
  }

  /** Keeps an event once; returns why it ignored one about another refund than the run's own, once it knows it. */
  recordProviderEvent(e: ProviderEventSummary): string | undefined {
    const mine = this.ctx.refund?.refundId ?? this.effect.refundId;
    if (reviewFixes() && mine && e.refundId !== mine) return `names refund ${e.refundId}, not this run's refund ${mine}`;
    if (this.providerEvents.some((x) => x.id === e.id)) return;
    // Past the cap, only an event that moves its refund further along is kept: a late failure is never dropped.
    const further = lifecycleRank(e.refundStatus) > lifecycleRank(furthestEvent(this.providerEvents, e.refundId)?.refundStatus ?? 'pending');
    if (this.providerEvents.length >= MAX_PROVIDER_EVENTS && !further) return;
    this.providerEvents.push(e);
    return undefined;
  }

  view(): RefundRunState {
    return redact({
      workflowId: this.workflowId,
      request: this.request,
      status: this.status,
      operation: this.operation,
      effect: this.effect,
      provider: { name: 'stripe' as const, scope: this.settings?.scope ?? null, changed: false as const },
      lastFailure: this.lastFailure,
      recovery: this.recovery,
      reconciliation: this.reconciliation,
      budget: this.budget.view(),
      outcome: this.outcome,
      parked: this.parked,
      decisions: this.desk.records,
      providerEvents: this.providerEvents,
      ignoredMessages: this.ignored.view,
      awaitingProvider: this.awaitingProvider,
      steps: this.steps.table(),
    });
  }

  /**
   * Parks the run: it stays Running, with its finished steps and their outputs, waiting for a
   * decision, findable by RefundNeedsAttention = true, with its verdict and next action.
   */
  park(stopped: RunStopped): void {
    const failure = stopped.failedStep ? this.steps.get(stopped.failedStep).error : undefined;
    const notice = this.steps.get('notify_customer');
    const messageId = notice.error?.provider.messageId ?? (notice.output as { messageId?: unknown } | undefined)?.messageId;
    const view = verdictFor(
      {
        effect: this.effect,
        failedStep: stopped.failedStep,
        failure: failure ? { code: failure.code, certainty: failure.certainty } : null,
        quarantined: stopped.quarantined,
        compensationPending: this.cannotCompensate() === null,
        operationId: this.ctx.operationId || null,
        noticeMessageId: typeof messageId === 'string' ? messageId : null,
        noticeHeld: notice.compensation?.status === 'held',
        ...(reviewFixes() && stopped.failedStep && { earlierAttemptMayHaveTakenEffect: this.steps.get(stopped.failedStep).ledger.some(mayHaveTakenEffect) }),
        retryLooksFirst: reviewFixes(),
      },
      this.decisionPolicy,
    );
    this.outcome = { status: 'needs_attention', failedStep: stopped.failedStep, reason: stopped.reason, quarantined: stopped.quarantined };
    this.parked = { since: now(), failedStep: stopped.failedStep, reason: stopped.reason, ...view };
    this.deskView.parked = { failedStep: stopped.failedStep };
    this.desk.reopen();
    this.status = 'needs_attention';
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.status, value: 'needs_attention' },
      { key: SEARCH_ATTRIBUTES.step, value: stopped.failedStep ?? 'none' },
      { key: SEARCH_ATTRIBUTES.effect, value: this.effect.status },
      { key: SEARCH_ATTRIBUTES.verdict, value: view.verdict },
      { key: SEARCH_ATTRIBUTES.needsAttention, value: true },
    ]);
  }

  /** While parked, a proposal waiting for a second person shows as awaiting_approval; answered, the run is back to needs_attention until it moves on. */
  noteDecision(): void {
    if (!this.parked) return;
    this.setStatus(this.desk.awaitingApproval ? 'awaiting_approval' : 'needs_attention');
  }

  /** A run that ended with work left for a person (cancelled mid-saga) is still among the runs that need one. */
  flagForAttention(): void {
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.effect, value: this.effect.status },
      { key: SEARCH_ATTRIBUTES.verdict, value: 'stop and hand to a person' },
      { key: SEARCH_ATTRIBUTES.needsAttention, value: true },
    ]);
  }

  /** Whether the run, ending now, leaves a person something to settle: a refund that stands or may stand with its saga unfinished, or an open compensation. */
  leavesWorkBehind(): boolean {
    const sent = this.effect.status !== 'none' || this.steps.get('create_refund').status !== 'pending';
    if (!sent) return false;
    return !(this.effect.status === 'failed' && this.cannotCompensate() !== null);
  }

  /** A decision was taken: the run moves on, no longer among those that need a person. */
  unpark(): void {
    this.parked = null;
    this.deskView.parked = null;
    this.outcome = null;
    this.status = 'running';
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.status, value: 'running' },
      { key: SEARCH_ATTRIBUTES.needsAttention, value: false },
    ]);
  }

  /** The run's final word, with what is known of the refund; nothing about it needs a person any more. */
  end(status: Exclude<TerminalStatus, 'needs_attention' | 'completed'>, reason: string, failedStep: RefundStep | null): void {
    this.outcome = { status, failedStep, reason, quarantined: false };
    this.status = status;
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.status, value: status },
      { key: SEARCH_ATTRIBUTES.step, value: failedStep ?? 'none' },
      { key: SEARCH_ATTRIBUTES.effect, value: this.effect.status },
      { key: SEARCH_ATTRIBUTES.needsAttention, value: false },
    ]);
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
      .filter((step) => REFUND_SAGA[step].undo.kind === 'compensation' && this.steps.get(step).compensation?.status !== 'completed');
    // A correction held back (a notice whose hand-over is unknown) is one a person's compensate decision sends.
    const held = REFUND_STEPS.filter((step) => this.steps.get(step).compensation?.status === 'held');
    return open.length || held.length ? null : 'no finished step has a compensation left to run';
  }

  /** Moves the run to a new status; a transition an operator may search for is mirrored to the search attributes. */
  setStatus(status: RunStatus, step?: string): void {
    if (status === this.status) return;
    this.status = status;
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.status, value: status },
      ...(step ? [{ key: SEARCH_ATTRIBUTES.step, value: step }] : []),
    ]);
  }

  /** The activities at one boundary, with options derived from the policy and what is left of the budget. */
  activities(boundary: Boundary, essential = false, requestsPerAttempt = 1): RefundActivities {
    // Runs from before an attempt's several requests were paid for whole still schedule it with fewer calls left (patched() only there).
    const short = requestsPerAttempt > 1 && !essential && this.budget.providerCallsLeft() < requestsPerAttempt;
    const perAttempt = short && !isPatched(WHOLE_ATTEMPTS) ? 1 : requestsPerAttempt;
    try {
      return pooledActivities<RefundActivities>(this.budget.options(this.policy, boundary, essential, perAttempt));
    } catch (err) {
      if (err instanceof BudgetExhausted) throw new StepFailedError('budget', stepError('BUDGET_EXCEEDED', 'not_executed', 'run_budget', err.message));
      throw err;
    }
  }

  /** Runs a saga step, paying for it from the budget and remembering how it failed. */
  async step<T>(
    name: RefundStep,
    input: unknown,
    key: string | undefined,
    boundary: Boundary,
    schema: z.ZodType,
    call: (a: RefundActivities) => Promise<Evidenced<T>>,
    options: { essential?: boolean; sends?: boolean; requestsPerAttempt?: number } = {},
  ): Promise<T> {
    try {
      const acts = this.activities(boundary, options.essential, options.requestsPerAttempt);
      return await this.steps.run(name, input, key, boundary, schema, () => call(acts), options.sends ?? false);
    } catch (err) {
      if (!(err instanceof StepFailedError)) throw err;
      this.remember(name, boundary, err.error);
      if (err.step === 'budget') this.steps.fail(name, err.error);
      throw err;
    } finally {
      this.pay(this.steps.get(name), boundary);
    }
  }

  /** A call outside the step table (a reconciliation lookup), paid for and validated the same way. */
  async call<T>(what: string, boundary: Boundary, schema: z.ZodType, fn: (a: RefundActivities) => Promise<Evidenced<T>>, options: { essential?: boolean } = {}): Promise<T> {
    const acts = this.activities(boundary, options.essential);
    let raw: unknown;
    try {
      raw = await fn(acts);
    } catch (err) {
      const { error, ledger } = describeFailure(err, boundary, what, false);
      this.budget.spend({ provider: boundary !== 'store', ...tally({ attempt: ledger.length, ledger }) });
      throw new StepFailedError(what, error);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw new StepFailedError(what, stepError('POISON', 'undeterminable', 'result_unusable', `${what} returned a result the workflow cannot use`));
    // The parsed result: a field an older worker did not send gets its schema's default.
    const { evidence, ...result } = parsed.data as Evidenced<T>;
    this.budget.spend({ provider: boundary !== 'store', ...tally(evidence) });
    return result as T;
  }

  /** The operation's record as last read: at its begin, or after a send that failed (whose facts carry it). */
  private record: SendRecord | null = null;

  noteRecord(op: SendRecord): void {
    this.record = { status: op.status, requestsSent: op.requestsSent, provenAbsentThrough: op.provenAbsentThrough, refund: op.refund ?? null };
  }

  /** What the operation's record says of the refund, over every send of every run; null before it was read. */
  recordedEffect(): RecordedEffect | null {
    return this.record && effectOfRecord(this.record);
  }

  /** Keeps a failure and the move the policy prescribes for it. */
  remember(step: string, boundary: Boundary, error: StepError): RecoveryRule {
    this.lastFailure = { step, ...error };
    // Facts from a failure a test or an older worker shaped may be missing: the record then stays as last read.
    const { operationStatus, requestsSent, provenAbsentThrough } = error.provider ?? {};
    if (typeof operationStatus === 'string' && typeof requestsSent === 'number') {
      this.noteRecord({ status: operationStatus, requestsSent, provenAbsentThrough: typeof provenAbsentThrough === 'number' ? provenAbsentThrough : null });
    }
    const rule = decide(this.policy, error.code, error.certainty, boundary);
    this.recovery = { action: rule.action, owner: rule.owner, note: rule.note ?? null };
    return rule;
  }

  stop(status: RunStopped['status'], reason: string, failedStep: RefundStep | null, quarantined = false): never {
    throw new RunStopped(status, reason, failedStep, quarantined);
  }

  finish(status: TerminalStatus, reason: string, failedStep: RefundStep | null, quarantined = false): void {
    this.outcome = { status, failedStep, reason, quarantined };
    this.setStatus(status, failedStep ?? 'completion_gate');
  }

  /**
   * Stamps the key's dedupe window once the first request went out: from the start of the first
   * attempt that sent one, which is no later than the send, so the window is never overstated.
   */
  noteFirstSend(): void {
    if (!this.operation || this.operation.dedupeWindowExpiresAt !== null || !this.settings) return;
    const first = this.steps.get('create_refund').ledger.find((a) => a.transportRequests > 0);
    if (first) this.operation.dedupeWindowExpiresAt = new Date(Date.parse(first.startedAt) + this.settings.provider.dedupeWindowMs).toISOString();
  }

  recordLookup(operationId: string, result: ReconcileOutcome, note: string, cursor: RefundRunState['reconciliation']['cursor']): void {
    const r = this.reconciliation;
    r.lookups += 1;
    r.lastResult = result;
    r.lastAt = now();
    if (cursor) r.cursor = cursor;
    r.history.push({ at: r.lastAt, operationId, result, note });
  }

  /** A step's provider requests and time spent retrying count against the run's budgets, each attempt once. */
  private pay(record: StepRecord, boundary: Boundary): void {
    const fresh = record.ledger.slice(this.paid.get(record.name) ?? 0);
    this.paid.set(record.name, record.ledger.length);
    const retryTimeMs = fresh.length > 1 ? Date.parse(fresh[fresh.length - 1]!.startedAt) - Date.parse(fresh[0]!.startedAt) : 0;
    this.budget.spend({ provider: boundary !== 'store', transportRequests: fresh.reduce((n, a) => n + a.transportRequests, 0), retryTimeMs });
  }
}
