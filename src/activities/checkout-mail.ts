// The checkout's emails: the receipt for a charge, and the correction when the checkout was undone
// after the receipt may have gone out. The recipient is read from the cart in the store.
import type { MailText } from './outbox-hand-over';
import { formatAmount } from './refund-notice';

export interface CheckoutMailInput {
  key: string;
  operationId: string;
  cartId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
  /** A person's approval to resend a hand-over that ended unknown (same Message-ID), and the hand-over they judged. */
  resendApprovedAt?: string;
  approvedHandOver?: string;
}

export function checkoutReceiptMail(input: CheckoutMailInput): MailText {
  const amount = formatAmount(input.amount, input.currency);
  return {
    subject: `Your receipt for ${amount} (cart ${input.cartId})`,
    text: [
      'Hello,',
      '',
      `We charged ${amount} for cart ${input.cartId}.`,
      `Payment reference: ${input.paymentIntentId}`,
    ].join('\n'),
  };
}

export function checkoutCorrectionMail(input: CheckoutMailInput): MailText {
  const amount = formatAmount(input.amount, input.currency);
  return {
    subject: `Correction: your order for cart ${input.cartId} was cancelled`,
    text: [
      'Hello,',
      '',
      `Please disregard our receipt for cart ${input.cartId}: the order was cancelled and ${amount} is refunded to your original payment method.`,
      `Payment reference: ${input.paymentIntentId}`,
    ].join('\n'),
  };
}
