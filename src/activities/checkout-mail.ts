// The checkout's emails: the receipt for a charge, and the correction when the checkout was undone
// after the receipt may have gone out. The recipient is read from the cart in the store.
import type { MailText, OutboxMail } from './outbox-hand-over';
import { formatAmount } from './refund-notice';

export interface CheckoutMailInput extends Omit<OutboxMail, 'orderId' | 'kind' | 'to'> {
  cartId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
}

const mail = (input: CheckoutMailInput, subject: string, line: string): MailText => ({
  subject,
  text: ['Hello,', '', line, `Payment reference: ${input.paymentIntentId}`].join('\n'),
});

export function checkoutReceiptMail(input: CheckoutMailInput): MailText {
  const amount = formatAmount(input.amount, input.currency);
  return mail(
    input,
    `Your receipt for ${amount} (cart ${input.cartId})`,
    `We charged ${amount} for cart ${input.cartId}.`,
  );
}

export function checkoutCorrectionMail(input: CheckoutMailInput): MailText {
  const amount = formatAmount(input.amount, input.currency);
  return mail(
    input,
    `Correction: your order for cart ${input.cartId} was cancelled`,
    `Please disregard our receipt for cart ${input.cartId}: the order was cancelled and ${amount} is refunded to your original payment method.`,
  );
}
