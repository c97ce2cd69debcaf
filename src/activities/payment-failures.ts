// How a payment activity's failure is classified: the provider's errors and the store's by their own tables.
import Stripe from 'stripe';
import { storeFailure } from './store-failures';
import { stripeFailure } from './stripe-failures';

/** Stripe's errors by the Stripe table; anything else these activities meet comes from the store. */
export const paymentFailure = (write: boolean) => (err: unknown) =>
  err instanceof Stripe.errors.StripeError ? stripeFailure(err, write) : storeFailure(err);
