// What the shop does before a refund, stood in for the demo, the tests, chaos and bench runs: an order paid at Stripe.
import type Stripe from 'stripe';
import type { Order } from '../../../src/domain/order';
import type { OrderStore } from '../../../src/store';

export interface DemoOrder {
  orderId: string;
  amount: number;
  currency: string;
  customerEmail: string;
}

/** A paid order (paid with a Stripe test payment method): a succeeded payment intent at the provider and the order row that points at it. Idempotent. */
export async function seedPaidOrder(
  stripe: Stripe,
  store: OrderStore,
  o: DemoOrder,
  paymentMethod = 'pm_card_visa',
): Promise<Order> {
  const existing = await store.getOrder(o.orderId);
  if (existing) return existing;
  const intent = await stripe.paymentIntents.create(
    {
      amount: o.amount,
      currency: o.currency,
      payment_method: paymentMethod,
      confirm: true,
      automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
      metadata: { order_id: o.orderId },
    },
    { idempotencyKey: `seed:${o.orderId}` },
  );
  return store.seedOrder({
    id: o.orderId,
    paymentIntentId: intent.id,
    customerEmail: o.customerEmail,
    currency: o.currency,
    amount: o.amount,
  });
}
