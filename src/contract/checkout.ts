// The checkout saga's contract: its request, ids, receipts and result. The cart (items, amount,
// customer) is in the store: the request names it and the card, so no address travels through history.
import { defineQuery } from '@temporalio/workflow';
import { z } from 'zod';
import { type PinnedSettings, pinnedSettingsSchema } from './receipts';
import type { EndedRefund } from './results';
import type { RunState } from './run-state';
import type { CheckoutStep } from './steps';
import { parseInput } from '../domain/zod-problems';

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
export const parseCheckoutRequest = (input: unknown): CheckoutRequest =>
  parseInput(checkoutRequestSchema, input, 'checkout request', '(request)');

export const CHECKOUT_WORKFLOW = 'checkoutWorkflow';
/** One checkout per cart. */
export const checkoutWorkflowId = (cartId: string) => `checkout-${cartId}`;
/** The operation its keys and audit trail are under. */
export const checkoutOperationId = (cartId: string) => `checkout:${cartId}`;
/** The scope of a checkout's refund of its charge: a refund operation of its own, which no refund saga undoes. */
export const CHECKOUT_REFUND_SCOPE = 'checkout';

/** What a reservation or a release did (`changed` false: its key had done it); a reservation hands the run the worker's settings. */
export const stockReceiptSchema = z.object({
  cartId: z.string(),
  amount: z.number().int().positive(),
  currency: z.string(),
  changed: z.boolean(),
  settings: pinnedSettingsSchema.optional(),
});
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

/** What looking up a charge whose answer was lost found at the provider. */
export const chargeLookupSchema = z.object({
  kind: z.enum(['found', 'absent', 'unknown']),
  charge: chargeReceiptSchema.nullable(),
  note: z.string(),
});

export type CheckoutRunState = RunState<CheckoutRequest, CheckoutStep>;
export const checkoutStateQuery = defineQuery<CheckoutRunState>('steps');

export type CheckoutResult =
  | { workflowId: string; cartId: string; operationId: string; status: 'completed'; charge: ChargeReceipt }
  | (Omit<EndedRefund, 'orderId' | 'failedStep'> & { cartId: string | null; failedStep: CheckoutStep | null });
