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
  type StockReceipt,
} from '../../contract';
import { SagaRunState } from '../../saga/workflow/run';
import { type Found, sentEffect } from '../../saga/workflow/reconciled-send';
import { approvedCorrection } from '../../saga/workflow/step-failure';
import type { PlannedUndo } from '../../saga/workflow/undo';
import { runDetails } from '../../saga/workflow/visibility';
import { UNDO } from './steps';

export class CheckoutRun extends SagaRunState<CheckoutStep, CheckoutRunState, RefundActivities> {
  reserved?: StockReceipt;
  charge?: ChargeReceipt;
  receipt?: NotificationReceipt;
  private chargeKnown: CheckoutRunState['effect'] = { status: 'none', certainty: 'none' };
  readonly effectName = 'charge';

  constructor(readonly request: CheckoutRequest) {
    super({ steps: CHECKOUT_STEPS, shows: { details: runDetails('Charge') } });
    this.show.started(request.cartId);
  }

  get operationId(): string {
    return checkoutOperationId(this.request.cartId);
  }

  /** What every step of the checkout is given: its key, the operation and the cart. */
  at(step: CheckoutStep, key = this.key(step)) {
    return { key, operationId: this.operationId, cartId: this.request.cartId };
  }

  state(): CheckoutRunState {
    return { ...this.runView(), saga: 'checkout', request: this.request, effect: this.effect };
  }

  protected noticeFacts() {
    return { noticeMessageId: this.receipt?.messageId ?? null };
  }

  /** What stands to be undone, latest first, each under its own key; the correction only once the charge is refunded. */
  undoPlan(resendApprovedAt?: string): PlannedUndo<CheckoutStep>[] {
    const planned = (step: CheckoutStep, more = {}) => {
      const key = compensationKey(this.key(step));
      return { step, key, undo: UNDO[step], input: { ...this.at(step, key), ...more } };
    };
    const { paymentIntentId, amount, currency, status } = this.charge ?? {};
    const money = status === 'succeeded' && { paymentIntentId, amount, currency };
    const resend = approvedCorrection(resendApprovedAt, this.steps.get('send_receipt').compensation);
    const plan: PlannedUndo<CheckoutStep>[] = [];
    if (money && this.mayHaveTaken('send_receipt'))
      plan.push({ ...planned('send_receipt', { ...money, ...resend }), after: 'charge_card' });
    if (money) plan.push(planned('charge_card', money));
    if (this.mayHaveTaken('reserve_stock')) plan.push(planned('reserve_stock'));
    return plan;
  }

  noteSend(found: Found<ChargeReceipt>): void {
    if (typeof found === 'object') this.charge = found;
    this.chargeKnown = sentEffect(found, this.lastFailure, (c) => (c.status === 'succeeded' ? 'charged' : 'declined'));
  }

  /** What is known of the charge; a charge whose refund completed is refunded. */
  get effect(): CheckoutRunState['effect'] {
    const refunded = this.chargeKnown.status === 'charged' && !this.openUndos().includes('charge_card');
    return refunded ? { status: 'refunded', certainty: 'completed' } : this.chargeKnown;
  }
}
