// The checkout saga's activities: the cart's stock reserved and released (the store), the card charged once
// under its step key through the send protocol (its record in the store's sends), and a lost answer looked up.
import type Stripe from 'stripe';
import { CHECKOUT_REFUND_SCOPE, type ChargeReceipt, lookupKey, pinSettings, type RunSettings } from '../contract';
import { lookUpRecorded, sendRecorded, type SendAt } from '../saga/recorded-send';
import type { OrderStore } from '../store';
import { Classified, stepCall } from './attempt';
import { stripeSendParts } from './create-refund';
import { paymentRefunds } from './refund-payment';
import { receiptNotRecorded, storeFailure } from './store-failures';
import { paymentFailure } from './stripe-failures';

type CartStepInput = SendAt & { cartId: string };

/** The worker's settings (its provider's windows too): a reservation hands them to its run, as a refund's first step does. */
type CheckoutDeps = Parameters<typeof paymentRefunds>[0] & { settings: RunSettings };

/** How long after a request its PaymentIntent may still be missing from Search results, at the least. */
const SEARCH_CONSISTENCY_MS = 5 * 60_000;

type Answer = { pi: Stripe.PaymentIntent; requestId: string | null; replayed: boolean };

/** What a PaymentIntent says of its charge; null while it is neither charged nor declined. */
function chargeOf(pi: Stripe.PaymentIntent, replayed = false): ChargeReceipt | null {
  // A card that asks for the customer's authentication cannot be charged here (nobody is there to give it): declined.
  const declineCode =
    pi.status === 'requires_action'
      ? 'authentication_required'
      : (pi.last_payment_error?.decline_code ?? pi.last_payment_error?.code ?? null);
  const status = pi.status === 'succeeded' ? 'succeeded' : declineCode ? 'declined' : null;
  return status && { paymentIntentId: pi.id, status, amount: pi.amount, currency: pi.currency, declineCode, replayed };
}

/** The cart a checkout step works on, from the store (never from history); a missing one is refused. */
export async function cartOf(store: OrderStore, cartId: string) {
  const cart = await store.checkouts.cart(cartId);
  if (cart) return cart;
  const message = `cart ${cartId} does not exist; nothing was sent`;
  throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'cart_not_found', message);
}

export function createCheckoutActivities(deps: CheckoutDeps) {
  const { store, attempt } = deps;
  const windows = deps.settings.provider;
  const pinned = pinSettings(deps.settings);
  const stripeSend = stripeSendParts(windows, () => store.operations.clock());
  const refundPayment = paymentRefunds(deps);

  return {
    reserveStock: (input: CartStepInput) =>
      attempt(stepCall('reserve_stock', input, 'store'), storeFailure, async () => ({
        ...(await store.checkouts.reserve(input.cartId, input.key)),
        settings: pinned,
      })),
    releaseStock: (input: CartStepInput) =>
      attempt(stepCall('reserve_stock:compensate', input, 'store'), storeFailure, () =>
        store.checkouts.release(input.cartId, input.key),
      ),

    /** Sends the charge unless its record says not to; a decline is its receipt as much as a charge is. */
    chargeCard: (input: CartStepInput & { paymentMethod: string }) =>
      attempt(stepCall('charge_card', input, 'stripe', 'stripe:charge_card'), paymentFailure(true), async (a) => {
        const { amount, currency } = await cartOf(store, input.cartId);
        return sendRecorded<ChargeReceipt, Answer>(a, store.sends, input, 'charge', {
          ...stripeSend,
          request: async (timeout) => {
            try {
              const pi = await deps.stripe(a).paymentIntents.create(
                {
                  amount,
                  currency,
                  payment_method: input.paymentMethod,
                  confirm: true,
                  automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
                  metadata: { operation_id: input.operationId, key: input.key },
                },
                { idempotencyKey: input.key, timeout },
              );
              const { requestId, headers } = pi.lastResponse;
              return { pi, requestId: requestId ?? null, replayed: headers['idempotent-replayed'] === 'true' };
            } catch (err) {
              // Declined: the PaymentIntent exists and charged nothing; the provider's answer, recorded like a charge.
              const e = err as Stripe.errors.StripeError;
              if (e.type !== 'StripeCardError' || !e.payment_intent) throw err;
              return { pi: e.payment_intent, requestId: e.requestId ?? null, replayed: false };
            }
          },
          receiptOf: ({ pi, replayed }) => {
            const receipt = chargeOf(pi, replayed);
            if (receipt) return receipt;
            const message = `${pi.id} is ${pi.status}: neither charged nor declined`;
            throw new Classified('UNKNOWN_OUTCOME', 'undeterminable', 'charge_unsettled', message);
          },
          requestId: (answer) => answer.requestId,
          notRecorded: ({ pi }, err) =>
            receiptNotRecorded(err, `${pi.id} was answered`, { provider: { paymentIntentId: pi.id } }),
        });
      }),

    /** A charge whose answer was lost, by its key in the metadata; not found proves absence only once nothing can land. */
    reconcileCharge: (input: CartStepInput) =>
      attempt(
        { ...stepCall('reconcile', input, 'stripe'), key: lookupKey(input.key, 'reconcile') },
        paymentFailure(false),
        async (a) => {
          const { kind, receipt, note } = await lookUpRecorded(a, store, input, {
            find: async () => {
              const query = `metadata['key']:'${input.key}'`;
              const [pi] = (await deps.stripe(a).paymentIntents.search({ query })).data;
              if (!pi) return null;
              const charge = chargeOf(pi);
              const note = charge ? `found ${pi.id}: ${charge.status}` : `found ${pi.id}, still ${pi.status}`;
              return { receipt: charge, note };
            },
            // Stripe's Search is not read-after-write (it lags up to a minute, longer in incidents): a miss proves less than a list's.
            landsWithinMs: Math.max(windows.consistencyMs, SEARCH_CONSISTENCY_MS),
            absent: `no PaymentIntent carries key ${input.key}: nothing was charged`,
          });
          return { kind, charge: receipt, note };
        },
      ),

    /** The charge refunded as a refund operation of its own (`refund:checkout:<cart>:v1`). */
    refundCharge: (input: CartStepInput & { paymentIntentId: string; amount: number; currency: string }) =>
      refundPayment({ ...input, step: 'charge_card:compensate', scope: CHECKOUT_REFUND_SCOPE, orderId: input.cartId }),
  };
}
