// The checkout saga's activities: the cart's stock reserved and released (the store), the card
// charged once under its step key (a Stripe PaymentIntent created and confirmed through the send
// protocol, its record in the store's sends) and, when its answer was lost, looked up by that key.
// A decline is the provider's answer, not a failure: a receipt that says nothing was charged.
import type Stripe from 'stripe';
import {
  type ChargeReceipt,
  type Evidenced,
  lookupKey,
  operationId as refundOperationId,
  type RefundReceipt,
} from '../contract';
import { outsideDedupeWindow, sendOnce } from '../saga/send';
import type { OrderStore, StockReceipt } from '../store';
import { Classified, type AttemptRunner } from './attempt';
import { provesNothingSent, type CreateRefundInput } from './create-refund';
import { requestHash } from './operations';
import { actor } from './payment-context';
import { paymentFailure } from './payment-failures';
import { requestTimeout } from './request-deadline';
import { sendWindow } from './send-window';
import { storeFailure } from './store-failures';
import { stripeFailure } from './stripe-failures';
import type { ProviderWindows } from '../contract';

export interface CartStepInput {
  key: string;
  operationId: string;
  cartId: string;
}
export interface ChargeInput extends CartStepInput {
  paymentMethod: string;
}
/** Refunding a charge a compensation undoes: the refund's own send step, under the compensation's key. */
export interface RefundChargeInput extends CartStepInput {
  paymentIntentId: string;
  amount: number;
  currency: string;
}
export type ChargeLookup = { kind: 'found' | 'absent' | 'unknown'; charge: ChargeReceipt | null; note: string };

interface CheckoutDeps {
  stripe: Stripe;
  store: OrderStore;
  attempt: AttemptRunner;
  windows: ProviderWindows;
  createRefund: (input: CreateRefundInput) => Promise<Evidenced<RefundReceipt>>;
}

/** How long after a request its PaymentIntent may still be missing from Search results, at the least. */
export const SEARCH_CONSISTENCY_MS = 5 * 60_000;

type Answer = { pi: Stripe.PaymentIntent; requestId: string | null; replayed: boolean };

/** What a PaymentIntent says of its charge; null while it is neither charged nor declined. */
function chargeOf(pi: Stripe.PaymentIntent, replayed = false): ChargeReceipt | null {
  // A card that asks for the customer's authentication cannot be charged here (nobody is there to give it): declined.
  const declineCode =
    pi.status === 'requires_action'
      ? 'authentication_required'
      : (pi.last_payment_error?.decline_code ?? pi.last_payment_error?.code ?? null);
  const status = pi.status === 'succeeded' ? 'succeeded' : declineCode ? 'declined' : null;
  if (!status) return null;
  return { paymentIntentId: pi.id, status, amount: pi.amount, currency: pi.currency, declineCode, replayed };
}

/** The cart a checkout step works on, from the store (never from history); a missing one is refused. */
export async function cartOf(store: OrderStore, cartId: string) {
  const cart = await store.checkouts.cart(cartId);
  if (!cart)
    throw new Classified(
      'PERMANENT_BUSINESS',
      'not_executed',
      'cart_not_found',
      `cart ${cartId} does not exist; nothing was sent`,
    );
  return cart;
}

export function createCheckoutActivities(deps: CheckoutDeps) {
  const { stripe, store, attempt, windows } = deps;
  const { sends, checkouts } = store;
  const { onWireForMs } = sendWindow(windows);
  const storeCall = (step: string, input: CartStepInput) => ({
    step,
    key: input.key,
    operationId: input.operationId,
    boundary: 'store' as const,
  });
  /** Sends the charge unless its record says not to; a decline is its receipt as much as a charge is. */
  const charge = (input: ChargeInput) =>
    attempt(
      { ...storeCall('charge_card', input), boundary: 'stripe', breaker: 'stripe:charge_card' },
      paymentFailure(true),
      async () => {
        const cart = await cartOf(store, input.cartId);
        const record = await sends.get<ChargeReceipt>(input.key, input.operationId);
        return sendOnce<typeof record, ChargeReceipt, Answer>({
          record,
          insideWindow: async (r) =>
            r.firstSentAt === null ||
            (await store.operations.clock()) + onWireForMs < Date.parse(r.firstSentAt) + windows.dedupeWindowMs,
          replayed: (receipt) => ({ ...receipt, replayed: true }),
          reconcileFirst: (r) => outsideDedupeWindow(`the charge was first sent at ${r.firstSentAt}`, input.key),
          maxRequestMs: windows.requestTimeoutMs,
          stamp: (onWire) => sends.stamp(input.key, input.operationId, actor(), onWire).then(() => undefined),
          request: (timeout) =>
            stripe.paymentIntents
              .create(
                {
                  amount: cart.amount,
                  currency: cart.currency,
                  payment_method: input.paymentMethod,
                  confirm: true,
                  automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
                  metadata: { operation_id: input.operationId, key: input.key },
                },
                { idempotencyKey: input.key, timeout },
              )
              .then(
                (pi) => ({
                  pi,
                  requestId: pi.lastResponse.requestId ?? null,
                  replayed: pi.lastResponse.headers['idempotent-replayed'] === 'true',
                }),
                (err: unknown) => {
                  // Declined: the PaymentIntent exists and charged nothing; the provider's answer, recorded like a charge.
                  const e = err as Stripe.errors.StripeError;
                  if (e.type === 'StripeCardError' && e.payment_intent)
                    return { pi: e.payment_intent, requestId: e.requestId ?? null, replayed: false };
                  throw err;
                },
              ),
          classify: (err) => stripeFailure(err, true),
          provesNothingSent,
          // The record already shows the send open (sent, neither settled nor proven absent): nothing more to write.
          recordUnknown: async () => undefined,
          recordAbsent: (failure, through) => sends.provenAbsent(input.key, through, actor(), failure.reason),
          receiptOf: ({ pi, replayed }) => {
            const receipt = chargeOf(pi, replayed);
            if (!receipt)
              throw new Classified(
                'UNKNOWN_OUTCOME',
                'undeterminable',
                'charge_unsettled',
                `${pi.id} is ${pi.status}: neither charged nor declined`,
              );
            return receipt;
          },
          recordReceipt: ({ requestId }, receipt) => sends.settle(input.key, receipt, actor(), { requestId }),
          notRecorded: ({ pi }, err) =>
            new Classified(
              storeFailure(err).code,
              'completed',
              'receipt_not_recorded',
              `${pi.id} was answered, but its receipt could not be recorded: ${storeFailure(err).message}`,
              {
                provider: { paymentIntentId: pi.id },
                cause: err,
              },
            ),
        });
      },
    );

  /**
   * What became of a charge whose answer was lost, by its key in the PaymentIntent's metadata. Not found proves
   * absence only once every request of the key is off the wire and the search has had its consistency window.
   */
  const lookUp = (input: CartStepInput) =>
    attempt(
      { ...storeCall('reconcile', input), key: lookupKey(input.key, 'reconcile'), boundary: 'stripe' },
      paymentFailure(false),
      async (): Promise<ChargeLookup> => {
        const record = await sends.get<ChargeReceipt>(input.key, input.operationId);
        if (record.receipt) return { kind: 'found', charge: record.receipt, note: 'its receipt is on record' };
        const began = await store.operations.clock();
        const query = `metadata['key']:'${input.key}'`;
        const found = await stripe.paymentIntents.search(
          { query },
          { timeout: requestTimeout(windows.requestTimeoutMs) },
        );
        const pi = found.data[0];
        const charge = pi ? chargeOf(pi) : null;
        if (pi && charge) {
          await sends.settle(input.key, charge, actor(), { reconciled: true });
          return { kind: 'found', charge, note: `found ${pi.id}: ${charge.status}` };
        }
        if (pi) return { kind: 'unknown', charge: null, note: `found ${pi.id}, still ${pi.status}` };
        // Stripe's Search is not read-after-write (it lags up to a minute, longer in incidents): a miss proves less than a list's.
        const window = Math.max(windows.consistencyMs, SEARCH_CONSISTENCY_MS);
        const settled = record.offTheWireBy === null ? 0 : Date.parse(record.offTheWireBy) + window;
        if (began < settled)
          return {
            kind: 'unknown',
            charge: null,
            note: `not found yet: a request may still land until ${new Date(settled).toISOString()}`,
          };
        const proven = await sends.provenAbsent(input.key, record.requestsSent, actor(), 'not found at the provider');
        return proven
          ? { kind: 'absent', charge: null, note: `no PaymentIntent carries key ${input.key}: nothing was charged` }
          : { kind: 'unknown', charge: null, note: 'sent again while it was looked up' };
      },
    );

  return {
    reserveStock: (input: CartStepInput): Promise<Evidenced<StockReceipt>> =>
      attempt(storeCall('reserve_stock', input), storeFailure, () => checkouts.reserve(input.cartId, input.key)),
    releaseStock: (input: CartStepInput): Promise<Evidenced<StockReceipt>> =>
      attempt(storeCall('reserve_stock:compensate', input), storeFailure, () =>
        checkouts.release(input.cartId, input.key),
      ),
    chargeCard: charge,
    reconcileCharge: lookUp,
    /** The charge refunded as a refund operation of its own (`refund:checkout:<cart>:v1`), its intent committed first. */
    async refundCharge(input: RefundChargeInput): Promise<Evidenced<RefundReceipt>> {
      const request = {
        orderId: input.cartId,
        amount: input.amount,
        currency: input.currency,
        reason: 'requested_by_customer' as const,
      };
      const operationId = refundOperationId('checkout', input.cartId, 1);
      const intent = {
        operationId,
        orderId: input.cartId,
        operationVersion: 1,
        scope: 'checkout',
        requestHash: requestHash(request),
        request,
        actor: actor(),
      };
      await attempt({ ...storeCall('charge_card:compensate', input), key: `${input.key}#intent` }, storeFailure, () =>
        store.operations.commitIntent(intent),
      );
      return deps.createRefund({
        ...request,
        operationId,
        paymentIntentId: input.paymentIntentId,
        idempotencyKey: input.key,
      });
    },
  };
}
