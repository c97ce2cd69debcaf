// The customer's correction, sent when a refund they were told of did not go through.
import type { MailText, OutboxMail } from './outbox';

/** Why a correction is sent, as the customer may read it. Operator-facing error text never goes into an email. */
const CORRECTION_REASONS = {
  refund_failed: 'your bank or card issuer could not accept the refund, so no money was returned to you for it',
  refund_canceled: 'the refund was cancelled before it reached your account, so no money was returned to you for it',
} as const;
export type CorrectionReason = keyof typeof CORRECTION_REASONS;

export interface RefundCorrectionInput extends Omit<OutboxMail, 'kind' | 'to'> {
  refundId: string;
  reason: CorrectionReason;
}

export function refundCorrectionMail(input: RefundCorrectionInput): MailText {
  return {
    subject: `Correction: your refund for order ${input.orderId} did not go through`,
    text: [
      'Hello,',
      '',
      `We recently told you that a refund for order ${input.orderId} had been issued. That message was wrong:`,
      `${CORRECTION_REASONS[input.reason] ?? CORRECTION_REASONS.refund_failed}.`,
      `Refund reference: ${input.refundId}`,
      '',
      'We are sorry for the confusion. Reply to this email if you have any questions.',
    ].join('\n'),
  };
}
