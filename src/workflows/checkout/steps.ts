// The checkout's steps as definitions that execute, the charge's lookup by key, and each step's undo.
import { lifecycleRank } from '../../domain/order';
import {
  chargeLookupSchema,
  chargeReceiptSchema,
  type CheckoutStep,
  notificationReceiptSchema,
  refundReceiptSchema,
  type RefundReceipt,
  stockReceiptSchema,
} from '../../contract';
import { defineCall, defineStep, keyed } from '../../saga/step';
import type { UndoCall } from '../../saga/workflow/undo';

export const CHECKOUT = {
  reserve_stock: defineStep('reserve_stock', {
    activity: 'reserveStock',
    boundary: 'store',
    effect: 'write',
    runs: 'effects',
    output: stockReceiptSchema,
    key: keyed,
    rejects: (input: { key: string; cartId: string }) =>
      `cart ${input.cartId} cannot be checked out, and nothing was charged`,
  }),
  charge_card: defineStep('charge_card', {
    activity: 'chargeCard',
    boundary: 'stripe',
    effect: 'send',
    runs: 'effects',
    output: chargeReceiptSchema,
    key: keyed,
  }),
  send_receipt: defineStep('send_receipt', {
    activity: 'sendCheckoutReceipt',
    boundary: 'smtp',
    effect: 'send',
    runs: 'effects',
    output: notificationReceiptSchema,
    key: keyed,
  }),
  /** A charge whose answer was lost, looked up by its key: found, proven absent, or still unknown. */
  reconcile_charge: defineCall({
    activity: 'reconcileCharge',
    boundary: 'stripe',
    effect: 'read',
    runs: 'reconcile',
    output: chargeLookupSchema,
  }),
};

/** Each step's undo: stock put back, the charge refunded (the refund's own send step), a correction for a receipt. */
export const UNDO: Record<CheckoutStep, UndoCall> = {
  reserve_stock: { activity: 'releaseStock', boundary: 'store', output: stockReceiptSchema },
  charge_card: {
    activity: 'refundCharge',
    boundary: 'stripe',
    output: refundReceiptSchema,
    // Given back only once the provider says so: a pending refund is asked again, a failed one gave nothing back.
    undone: (refund: RefundReceipt) => lifecycleRank(refund.status) === 1,
    pending: (refund: RefundReceipt) => lifecycleRank(refund.status) === 0,
  },
  send_receipt: { activity: 'sendCheckoutCorrection', boundary: 'smtp', output: notificationReceiptSchema },
};
