// The customer's correction, sent when a refund they were told of did not go through.
import type { MailText } from './outbox-hand-over';

/** Why a correction is sent, as the customer may read it. Operator-facing error text never goes into an email. */
export const CORRECTION_REASONS = {
  refund_failed: 'your bank or card issuer could not accept the refund, so no money was returned to you for it',
  refund_canceled: 'the refund was cancelled before it reached your account, so no money was returned to you for it',
} as const;
export type CorrectionReason = keyof typeof CORRECTION_REASONS;

export interface RefundCorrectionInput {
  key: string;
  operationId: string;
  orderId: string;
  refundId: string;
  reason: CorrectionReason;
  /** When a person approved resending a correction whose hand-over ended unknown: that hand-over, begun before it, is resent once (same Message-ID). */
  resendApprovedAt?: string;
  /** The hand-over the person judged (its `sendingSince`, by the store's clock): only it is resent. */
  approvedHandOver?: string;
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
