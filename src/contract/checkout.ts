// The checkout saga's contract: its request, its steps and ids, the receipts its steps return, and
// its result. A cart is in the store (its items, amount and customer); the request names it and
// the payment method, so that no customer address travels through history.
import { defineQuery } from '@temporalio/workflow';
import { z } from 'zod';
import { type PinnedSettings, pinnedSettingsSchema } from './receipts';
import type { EndedRefund } from './results';
import type { RunState } from './run-state';
import type { CheckoutStep } from './steps';
import { zodProblems } from '../domain/zod-problems';

export const checkoutRequestSchema = z
  .object({
    cartId: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'must be 1-64 letters, digits, "_" or "-"'),
    /** A Stripe PaymentMethod id (pm_…): the card, never its number. */
    paymentMethod: z
      .string()
      .regex(/^pm_[A-Za-z0-9_]{1,64}$/, 'must be a Stripe PaymentMethod id such as pm_card_visa'),
    requestedBy: z.string().trim().min(1, 'must name who asked for the checkout').max(200),
  })
  .strict();
export type CheckoutRequest = z.output<typeof checkoutRequestSchema>;

/** Parses a checkout request, throwing an error that names every bad field. Changes nothing. */
export function parseCheckoutRequest(input: unknown): CheckoutRequest {
  const parsed = checkoutRequestSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  throw new Error(`invalid checkout request: ${zodProblems(parsed.error, '(request)')}`);
}

export const CHECKOUT_WORKFLOW = 'checkoutWorkflow';
/** One checkout per cart: `checkout-<cart>`. */
export const checkoutWorkflowId = (cartId: string) => `checkout-${cartId}`;
/** `checkout:<cart>`: the operation its keys and audit trail are under. */
export const checkoutOperationId = (cartId: string) => `checkout:${cartId}`;

export const stockReceiptSchema = z.object({
  cartId: z.string(),
  amount: z.number().int().positive(),
  currency: z.string(),
  changed: z.boolean(),
  /** The reservation's: the worker's settings, which the run takes from then on (a run begun before took the defaults). */
  settings: pinnedSettingsSchema.optional(),
});
/** What a reservation or a release did: `changed` is false when the key had done it already. */
export type StockReceipt = Omit<z.output<typeof stockReceiptSchema>, 'settings'> & { settings?: PinnedSettings };

/** A charge as the provider answered: succeeded, or declined (a business outcome: nothing was charged). */
export const chargeReceiptSchema = z.object({
  paymentIntentId: z.string(),
  status: z.enum(['succeeded', 'declined']),
  amount: z.number().int().positive(),
  currency: z.string(),
  declineCode: z.string().nullable(),
  replayed: z.boolean().default(false),
});
export type ChargeReceipt = z.output<typeof chargeReceiptSchema>;

/** What reconciling a charge whose outcome is unknown found at the provider. */
export const chargeLookupSchema = z.object({
  kind: z.enum(['found', 'absent', 'unknown']),
  charge: chargeReceiptSchema.nullable(),
  note: z.string(),
});
export type ChargeLookup = z.output<typeof chargeLookupSchema>;

export type CheckoutRunState = RunState<CheckoutRequest, CheckoutStep>;
export const checkoutStateQuery = defineQuery<CheckoutRunState>('steps');

export type CheckoutResult =
  | { workflowId: string; cartId: string; operationId: string; status: 'completed'; charge: ChargeReceipt }
  | (Omit<EndedRefund, 'orderId' | 'failedStep'> & { cartId: string | null; failedStep: CheckoutStep | null });
