// The bare shape's activities: one plain call each, no key, no receipt, no classification.
// Temporal's retry policy (bare) or the whole run (naive) is all that tries again.
import { log } from '@temporalio/activity';
import type Stripe from 'stripe';
import type { Transporter } from 'nodemailer';
import type { OrderStore } from '../../../src/store';

export interface BareRefundInput {
  orderId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
  email: string;
}

/** With `logged`, each activity logs its attempt as the refund worker's steps do (bare+platform). */
export function createBareActivities(deps: {
  stripe: Stripe;
  store: OrderStore;
  mail: Transporter;
  from: string;
  logged?: boolean;
}) {
  const done = (step: string, input: BareRefundInput) => {
    if (deps.logged) log.info('step attempt succeeded', { step, orderId: input.orderId });
  };
  return {
    async refund(input: BareRefundInput): Promise<string> {
      const refund = await deps.stripe.refunds.create({
        payment_intent: input.paymentIntentId,
        amount: input.amount,
        metadata: { order_id: input.orderId },
      });
      done('refund', input);
      return refund.id;
    },
    /** Keyed by nothing but the refund it records: a second refund is recorded as a second refund. */
    async updateOrder(input: BareRefundInput, refundId: string): Promise<void> {
      await deps.store.applyRefund({ orderId: input.orderId, operationId: refundId, refundId, amount: input.amount });
      done('update_order', input);
    },
    async notify(input: BareRefundInput, refundId: string): Promise<void> {
      await deps.mail.sendMail({
        from: deps.from,
        to: input.email,
        subject: `Your refund for order ${input.orderId}`,
        text: `We refunded ${input.amount} ${input.currency.toUpperCase()} (${refundId}).`,
      });
      done('notify', input);
    },
  };
}

export type BareActivities = ReturnType<typeof createBareActivities>;
