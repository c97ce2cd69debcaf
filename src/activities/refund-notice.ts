// The customer's refund notice: what the activity is given, and the email it sends.
import { Classified } from './attempt';
import type { MailText, OutboxMail } from './outbox';

/** The recipient is read from the order in the store: a customer's address never travels through workflow history. */
export interface RefundNoticeInput extends Omit<OutboxMail, 'kind' | 'to'> {
  amount: number;
  currency: string;
  refundId: string;
}

/** One formatter per currency: building an Intl.NumberFormat costs far more than formatting. */
const formats = new Map<string, { format: Intl.NumberFormat; decimals: number }>();

/** Formats minor units in the currency's own number of decimals (1250 usd → "$12.50", 1250 jpy → "¥1,250"). */
export function formatAmount(amount: number, currency: string): string {
  const code = currency.toUpperCase();
  let known = formats.get(code);
  if (!known) {
    let format: Intl.NumberFormat;
    try {
      format = new Intl.NumberFormat('en-US', { style: 'currency', currency: code });
    } catch {
      const message = `cannot format an amount in unknown currency "${currency}"`;
      throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'unknown_currency', message);
    }
    formats.set(code, (known = { format, decimals: format.resolvedOptions().maximumFractionDigits ?? 2 }));
  }
  return known.format.format(amount / 10 ** known.decimals);
}

export function refundNoticeMail(input: RefundNoticeInput): MailText {
  const amount = formatAmount(input.amount, input.currency);
  return {
    subject: `Your refund of ${amount} for order ${input.orderId}`,
    text: [
      'Hello,',
      '',
      `We have refunded ${amount} to your original payment method for order ${input.orderId}.`,
      `Refund reference: ${input.refundId}`,
      '',
      'Depending on your bank it can take 5-10 business days to appear on your statement.',
    ].join('\n'),
  };
}
