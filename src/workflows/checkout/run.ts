// One checkout run's state, on the harness's: what the steps returned, what is known of the charge,
// the facts its verdict is drawn from, and what stands to be undone (latest first).
import type { RefundActivities } from '../../activities';
import {
  type ChargeReceipt,
  CHECKOUT_STEPS,
  checkoutOperationId,
  type CheckoutRequest,
  type CheckoutRunState,
  type CheckoutStep,
  compensationKey,
  type NotificationReceipt,
  type ParsedDecision,
  stepKey,
} from '../../contract';
import type { StockReceipt } from '../../store/checkouts';
import { maskEmails, redact } from '../../reliability/redaction';
import { outcomeUnknown } from '../../reliability/taxonomy';
import { SagaRunState } from '../../saga/workflow/run';
import type { PlannedUndo } from '../../saga/workflow/undo';
import type { Standing } from '../../saga/workflow/visibility';
import { REFUND_ATTRIBUTES } from '../refund/run';
import { UNDO } from './steps';

export class CheckoutRun extends SagaRunState<CheckoutStep, CheckoutRunState, RefundActivities> {
  reserved?: StockReceipt;
  charge?: ChargeReceipt;
  receipt?: NotificationReceipt;
  effect: CheckoutRunState['effect'] = { status: 'none', certainty: 'none' };

  constructor(readonly request: CheckoutRequest) {
    super({
      steps: CHECKOUT_STEPS,
      refuses: (d) => this.refusal(d),
      // The refund's search attributes, the cart as the key: operators find parked checkouts as they find refunds.
      shows: { attributes: REFUND_ATTRIBUTES, details },
    });
    this.show.started(request.cartId);
  }

  get operationId(): string {
    return checkoutOperationId(this.request.cartId);
  }

  key(step: CheckoutStep): string {
    return stepKey(this.operationId, step);
  }

  view(): CheckoutRunState {
    return redact({ ...this.runView(), saga: 'checkout', request: this.request, effect: this.effect });
  }

  protected noticeFacts() {
    return { noticeMessageId: this.receipt?.messageId ?? null };
  }

  /** Whether the receipt may have reached the customer: sent, being handed over, or handed over with no answer. */
  receiptMayHaveGone(): boolean {
    const r = this.steps.get('send_receipt');
    return r.status === 'completed' || r.status === 'running' || outcomeUnknown(r.error?.certainty);
  }

  /** Whether the charge stands un-refunded: charged, and its refund not completed, or failed at the provider. */
  refundOpen(): boolean {
    if (this.charge?.status !== 'succeeded') return false;
    const undo = this.steps.get('charge_card').compensation;
    const refund = (undo?.output as { status?: string } | undefined)?.status;
    return undo?.status !== 'completed' || refund === 'failed' || refund === 'canceled';
  }

  /** The steps whose undo has not completed, latest first. */
  openUndos(): CheckoutStep[] {
    const open = this.undoPlan().map((p) => p.step);
    return this.refundOpen() && !open.includes('charge_card') ? ['charge_card', ...open] : open;
  }

  /** What stands and is not undone yet, latest first, each under its own key; a correction resent only as a person approved. */
  undoPlan(resendApprovedAt?: string): PlannedUndo<CheckoutStep>[] {
    const { cartId } = this.request;
    const base = (step: CheckoutStep) => ({
      key: compensationKey(this.key(step)),
      operationId: this.operationId,
      cartId,
    });
    const charged = this.charge?.status === 'succeeded' ? this.charge : undefined;
    const money = charged && {
      paymentIntentId: charged.paymentIntentId,
      amount: charged.amount,
      currency: charged.currency,
    };
    const plan: PlannedUndo<CheckoutStep>[] = [];
    if (money && this.receiptMayHaveGone())
      plan.push({
        step: 'send_receipt',
        key: base('send_receipt').key,
        undo: UNDO.send_receipt,
        input: { ...base('send_receipt'), ...money, ...(resendApprovedAt && { resendApprovedAt }) },
      });
    if (money)
      plan.push({
        step: 'charge_card',
        key: base('charge_card').key,
        undo: UNDO.charge_card,
        input: { ...base('charge_card'), ...money },
      });
    if (this.reserved)
      plan.push({
        step: 'reserve_stock',
        key: base('reserve_stock').key,
        undo: UNDO.reserve_stock,
        input: base('reserve_stock'),
      });
    return plan.filter((p) => this.steps.get(p.step).compensation?.status !== 'completed');
  }

  cannotCompensate(): string | null {
    if (this.effect.status === 'unknown') return 'the charge is unknown: reconcile it first';
    return this.openUndos().length ? null : 'nothing of the checkout stands';
  }

  leavesWorkBehind(): boolean {
    return this.effect.status === 'unknown' || this.openUndos().length > 0;
  }

  private refusal(d: ParsedDecision): string | null {
    if (d.decision === 'reconcile' && this.effect.status !== 'unknown')
      return `nothing to reconcile: the charge is ${this.effect.status}`;
    if (d.decision === 'compensate')
      return this.cannotCompensate() && `nothing to compensate: ${this.cannotCompensate()}`;
    // Once undoing has begun, going forward would complete a checkout whose stock or money is given back.
    if (d.decision === 'retry-step' && this.steps.table().some((s) => s.compensation))
      return 'its compensation has begun: compensate finishes it, or abandon';
    if (d.decision === 'confirm-delivered')
      return 'the checkout takes no confirm-delivered: its receipt is settled through the message log, or resent by retry-step';
    return null;
  }
}

/** The run's page in the Web UI: where it stands, its verdict while parked, the charge. */
function details(state: CheckoutRunState, standing: Standing): string {
  const { outcome, parked } = state;
  const at = outcome?.failedStep ? ` at ${outcome.failedStep}` : '';
  return maskEmails(
    [
      `**${standing === 'CANCELED' ? 'cancelled' : state.status}**${outcome ? `${at}: ${outcome.reason}` : ''}`,
      ...(parked ? [`**Verdict:** ${parked.verdict}`, `**Decide:** \`npm run decide -- ${state.workflowId} …\``] : []),
      `**Charge:** ${state.effect.status}`,
      `**Evidence:** \`npm run inspect -- ${state.workflowId}\``,
    ].join('\n\n'),
  );
}
