// An order as the store keeps it, and how far along its lifecycle a refund is: the business's own
// facts, known to the store, the activities, the workflows and inspect alike.

export type OrderStatus = 'paid' | 'partially_refunded' | 'refunded';

export interface Order {
  id: string;
  paymentIntentId: string;
  customerEmail: string;
  currency: string;
  amount: number;
  refundedAmount: number;
  status: OrderStatus;
  version: number;
}

/**
 * How far along its lifecycle a refund status is. A refund only moves forward (pending →
 * succeeded → failed; canceled ends it too), so the furthest status any event gave is the refund's
 * status, in whatever order the events came.
 */
export function lifecycleRank(status: string): number {
  if (status === 'failed' || status === 'canceled') return 2;
  if (status === 'succeeded') return 1;
  return 0;
}
