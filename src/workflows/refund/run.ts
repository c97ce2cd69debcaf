// One refund run's state, on the harness's (SagaRunState): what it knows beyond it (the request,
// the operation, the refund's effect, the provider's news, reconciliation and the wait for the
// provider), the facts its verdict is drawn from, and whether compensating fits.
import type { RefundActivities } from '../../activities';
import { REFUND_SAGA, REFUND_STEPS, type RefundStep, type UndoContext } from '../../compensations/registry';
import {
  type AwaitingProvider,
  type BeginResult,
  type NotificationReceipt,
  type OrderReceipt,
  type RefundReceipt,
  type RefundRunState,
} from '../../contract';
import { retries, ruleFor } from '../../reliability/policy';
import { type Boundary, outcomeUnknown } from '../../reliability/taxonomy';
import type { RefundRequest } from '../../domain/refund-request';
import { type Found, sentEffect } from '../../saga/workflow/reconciled-send';
import type { StepError } from '../../saga/workflow/step-failure';
import { SagaRunState } from '../../saga/workflow/run';
import { Stopped } from '../../saga/workflow/run-stopped';
import { currentDetails } from './current-details';
import { refundRefusals } from './decisions';
import { OperationView } from './operation';
import { ProviderNews } from './provider-news';
import { stepFailed } from './stop-reasons';

/** What the run has gathered: the receipts of finished steps, and what a failed refund left. */
interface RefundContext {
  refund?: RefundReceipt;
  /** The receipt of the refund the provider failed or canceled after accepting it, once the run learns of it. */
  failedRefund?: RefundReceipt;
  orderReceipt?: OrderReceipt;
  notice?: NotificationReceipt;
  /** Why compensation is running, as the customer may read it. */
  correctionReason?: UndoContext['correctionReason'];
  /** Set when the provider refunded less than asked: what it refunded, for the record. */
  partialNote?: string;
}

export class RefundRun extends SagaRunState<RefundStep, RefundRunState, RefundActivities> {
  readonly ctx: RefundContext = {};
  /** Empty until loading the order commits the operation's intent. */
  operationId = '';
  readonly operation = new OperationView();
  readonly news = new ProviderNews(() => this.effect);
  /** What loading the order returned: the operation, the order (masked), earlier operations, the settings. */
  begin: BeginResult | null = null;
  effect: RefundRunState['effect'] = { status: 'none', certainty: 'none', refundId: null };
  readonly effectName = 'refund';
  reconciliation: RefundRunState['reconciliation'] = {
    lookups: 0,
    lastResult: null,
    lastAt: null,
    cursor: null,
    resubmissions: 0,
    history: [],
  };
  awaitingProvider: AwaitingProvider | null = null;
  /** The run has reached its completion gate: a decision runs the gate again, never a step before it. */
  atGate = false;

  constructor(readonly request: RefundRequest) {
    super({
      steps: REFUND_STEPS,
      refuses: refundRefusals({
        effect: () => this.effect.status,
        cannotCompensate: () => this.cannotCompensate(),
        outcomeUnknown: (step) => outcomeUnknown(this.steps.get(step).error?.certainty),
      }),
      shows: { details: currentDetails },
    });
    this.show.started(request.orderId);
  }

  state(): RefundRunState {
    return {
      ...this.runView(),
      request: this.request,
      operation: this.operation.identity,
      effect: this.effect,
      provider: { name: 'stripe' as const, scope: this.settings?.scope ?? null, changed: false as const },
      reconciliation: this.reconciliation,
      providerEvents: this.news.events,
      awaitingProvider: this.awaitingProvider,
    };
  }

  protected noticeFacts() {
    const notice = this.steps.get('notify_customer');
    const messageId =
      notice.error?.provider.messageId ?? (notice.output as { messageId?: unknown } | undefined)?.messageId;
    return {
      noticeMessageId: typeof messageId === 'string' ? messageId : null,
      noticeHeld: notice.compensation?.status === 'held',
    };
  }

  /** Whether the run, ending now, leaves a person something to settle: a refund that stands or may stand with its saga unfinished, or an open compensation. */
  leavesWorkBehind(): boolean {
    const sent = this.effect.status !== 'none' || this.steps.get('create_refund').status !== 'pending';
    if (!sent) return false;
    return !(this.effect.status === 'failed' && this.cannotCompensate() !== null);
  }

  /** A refund that did not go through owes the compensation of what its finished steps did. */
  protected compensationOwed(): boolean {
    return this.cannotCompensate() === null;
  }

  /** Why compensating now would be wrong, or null when the refund did not go through and a compensation is open. */
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

  /** Keeps a failure, the move the policy prescribes for it, and what it says of the operation's record. */
  override remember(step: string, boundary: Boundary, error: StepError): void {
    super.remember(step, boundary, error);
    // Facts from a failure a test or an older worker shaped may be missing: the record then stays as last read.
    const { operationStatus, requestsSent, provenAbsentThrough } = error.provider ?? {};
    if (typeof operationStatus === 'string' && typeof requestsSent === 'number')
      this.operation.note({
        status: operationStatus,
        requestsSent,
        provenAbsentThrough: typeof provenAbsentThrough === 'number' ? provenAbsentThrough : null,
      });
  }

  /** The create's receipt makes the refund; asked about, it is unknown; a key the provider still deduplicates proves no absence, so that changes nothing. */
  override noteSend(found: Found<RefundReceipt>): void {
    if (found === 'absent') return;
    const made = typeof found === 'object' ? found.refundId : this.lastFailure?.provider.refundId;
    const effect = sentEffect(found, this.lastFailure, () => 'refunded' as const);
    this.effect = { ...effect, refundId: typeof made === 'string' ? made : null };
  }

  /** How a step that failed for good stops the run: a business refusal is `rejected`, anything else needs a person. */
  stopFor(step: RefundStep, error: StepError): Stopped<RefundStep> {
    const rule = ruleFor(this.policy, error.code, error.certainty, REFUND_SAGA[step].boundary);
    const reasons = stepFailed(step, error, retries(rule) ? this.steps.get(step).attempts : null);
    const needsAttention = (reason: string) =>
      new Stopped('needs_attention', reason, step, rule.action === 'quarantine');
    if (REFUND_SAGA[step].onFailure === 'forward_repair')
      return needsAttention(reasons.refundStands(this.ctx.refund?.refundId));
    if (error.certainty !== 'not_executed') {
      this.effect = { status: 'unknown', certainty: error.certainty, refundId: null };
      return needsAttention(reasons.effectUnknown(this.operationId));
    }
    // This attempt had no effect; whether an earlier send did is the operation's record's to say, not this attempt's.
    const recorded = this.operation.recordedEffect();
    if (recorded?.status === 'unknown') {
      this.effect = { status: 'unknown', certainty: 'may_have_executed', refundId: this.effect.refundId };
      return needsAttention(reasons.earlierSendOpen(recorded.why, this.operationId));
    }
    const refusal = error.code === 'PERMANENT_BUSINESS' || error.code === 'INVALID_ARGUMENTS';
    if (refusal && rule.action === 'stop') return new Stopped('rejected', reasons.refused(), step);
    return needsAttention(reasons.nothingRefunded());
  }
}
