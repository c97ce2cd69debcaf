// Refunds as Stripe reports them: the receipt a refund gives, a payment intent's refunds listed
// over pages, which of them carry an operation, and a refund Stripe failed recorded on its operation.
import type Stripe from 'stripe';
import type { RefundReceipt } from '../contract';
import type { OperationLog, OperationUpdate } from '../store';

/** What Stripe says of a refund's end: its status, and why it failed when it did. */
type RefundEnd = { status: string | null; failure_reason?: string | null };
type Asked = Pick<RefundReceipt, 'amount' | 'currency'>;

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

/** Stripe's word that the refund returned nothing: it failed, or was canceled. */
export const providerFailed = (refund: RefundEnd) => refund.status === 'failed' || refund.status === 'canceled';

/** What Stripe's refund makes of its operation: failed (or canceled), partial (less than asked, or another currency), or refunded. */
export function refundUpdate(refund: Stripe.Refund, receipt: RefundReceipt, asked: Asked): OperationUpdate {
  if (providerFailed(refund)) return failedUpdate(refund, receipt);
  if (refund.currency !== asked.currency || refund.amount < asked.amount)
    return { status: 'partial', refund: receipt, reason: 'refund_differs' };
  return { status: 'refunded', refund: receipt };
}

/** Stripe's failure_reason (else its status) is the reason: the same record whoever read the refund. */
const failedUpdate = (refund: RefundEnd, receipt: RefundReceipt): OperationUpdate => ({
  status: 'failed',
  refund: receipt,
  reason: refund.failure_reason ?? refund.status ?? 'failed',
});

/** Records a refund Stripe failed (or canceled) on its operation (the gate, a follow-up, a checkout's undo). */
export function settleProviderFailure(
  log: OperationLog,
  refund: RefundEnd,
  receipt: RefundReceipt,
  at: { operationId: string; actor: string; event: string; detail?: Record<string, unknown> },
) {
  return log.settle(at.operationId, failedUpdate(refund, receipt), at.actor, at.event, at.detail);
}
