// Refunds as Stripe reports them: the receipt a refund gives, a payment intent's refunds listed
// over pages, and which of them carry an operation.
import type Stripe from 'stripe';
import type { RefundReceipt } from '../contract';

export function toReceipt(refund: Stripe.Refund, replayed: boolean): RefundReceipt {
  const pi = refund.payment_intent;
  return {
    refundId: refund.id,
    paymentIntentId: (typeof pi === 'string' ? pi : pi?.id) ?? '',
    amount: refund.amount,
    currency: refund.currency,
    status: refund.status ?? 'unknown',
    created: refund.created,
    operationId: refund.metadata?.operation_id ?? null,
    replayed,
  };
}

/** All of a payment intent's refunds, newest first, a page at a time (each page's request cut by its attempt). */
export async function listRefunds(stripe: Stripe, paymentIntentId: string): Promise<Stripe.Refund[]> {
  const all: Stripe.Refund[] = [];
  for (let startingAfter: string | undefined; ;) {
    const page = await stripe.refunds.list({
      payment_intent: paymentIntentId,
      limit: 100,
      ...(startingAfter && { starting_after: startingAfter }),
    });
    all.push(...page.data);
    if (!page.has_more || page.data.length === 0) return all;
    startingAfter = page.data[page.data.length - 1]!.id;
  }
}

/** The refunds in a payment intent's list that carry the operation id: more than one is never right (the gate's and the follow-up's single_refund). */
export function refundIdsOf(listed: Stripe.Refund[], operationId: string): string[] {
  return listed.filter((r) => r.metadata?.operation_id === operationId).map((r) => r.id);
}
