// The checkout's emails: the receipt for a charge, and the correction when the checkout was undone
// after the receipt may have gone out. The recipient is read from the cart in the store.
import type { MailText, OutboxMail } from './outbox';
import { formatAmount } from './refund-notice';

export interface CheckoutMailInput extends Omit<OutboxMail, 'orderId' | 'kind' | 'to'> {
  cartId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
}

export type CheckoutMailKind = Extract<OutboxMail['kind'], `checkout_${string}`>;

const TEXTS: Record<CheckoutMailKind, (cart: string, amount: string) => [subject: string, line: string]> = {
  checkout_receipt: (cart, amount) => [
    `Your receipt for ${amount} (cart ${cart})`,
    `We charged ${amount} for cart ${cart}.`,
  ],
  checkout_correction: (cart, amount) => [
    `Correction: your order for cart ${cart} was cancelled`,
    `Please disregard our receipt for cart ${cart}: the order was cancelled and ${amount} is refunded to your original payment method.`,
  ],
};

export function checkoutMail(kind: CheckoutMailKind, input: CheckoutMailInput): MailText {
  const [subject, line] = TEXTS[kind](input.cartId, formatAmount(input.amount, input.currency));
  return { subject, text: ['Hello,', '', line, `Payment reference: ${input.paymentIntentId}`].join('\n') };
}
