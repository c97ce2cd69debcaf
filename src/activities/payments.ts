// Payment activities: the refund through the official Stripe SDK, and reconciliation of a refund
// whose outcome is unknown. The operation's record in the store is consulted before every send.
// This module is what the worker, the workflows (for the inputs' types) and the tests import.
import { refundCreation } from './create-refund';
import type { PaymentDeps } from './payment-context';
import { refundReconciliation } from './reconcile-refund';

export type { CreateRefundInput } from './create-refund';
export type { PaymentDeps } from './payment-context';
export type { ReconcileRefundInput } from './reconcile-refund';
export { SEND_CLOCK_MARGIN_MS } from './send-window';
export { createStripeClient, type StripeClientConfig } from './stripe-client';

export function createPaymentActivities(deps: PaymentDeps) {
  return { ...refundCreation(deps), ...refundReconciliation(deps) };
}

export type PaymentActivities = ReturnType<typeof createPaymentActivities>;
