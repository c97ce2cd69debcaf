// The notification activities: each sends one email through the outbox's hand-over, once, or settles one.
import type { Transporter } from 'nodemailer';
import type { RecoveryPolicy } from '../reliability/policy';
import type { Evidenced, NotificationReceipt } from '../contract';
import type { OrderStore } from '../store';
import type { AttemptRunner } from './attempt';
import type { MessageLog } from './message-log';
import { cartOf } from './checkout';
import { checkoutCorrectionMail, checkoutReceiptMail, type CheckoutMailInput } from './checkout-mail';
import { DEFAULT_DIGEST_TO, digestMail, type DigestInput } from './attention-digest';
import { createOutboxHandOver, type ConfirmDeliveredInput } from './outbox-hand-over';
import { refundCorrectionMail, type RefundCorrectionInput } from './refund-correction';
import { refundNoticeMail, type RefundNoticeInput } from './refund-notice';
import { storeFailure } from './store-failures';

export interface NotificationDeps {
  /** Who reads the operators' digest (DIGEST_TO). */
  digestTo?: string;
  transport: Transporter;
  store: OrderStore;
  from: string;
  attempt: AttemptRunner;
  policy: RecoveryPolicy;
  /** The longest one send may take (tests shorten it); what is left of the attempt cuts it shorter. */
  maxSendMs?: number;
  /** The mail provider's log of accepted messages (MAIL_LOG_URL): hand-overs whose outcome is unknown are settled there. */
  messageLog?: MessageLog;
}

/** Outside an attempt nothing else bounds a send; inside one, what is left of its start-to-close does. */
const MAX_SEND_MS = 5 * 60_000;

export function createNotificationActivities(deps: NotificationDeps) {
  const { deliver, confirmDelivered } = createOutboxHandOver({ ...deps, maxSendMs: deps.maxSendMs ?? MAX_SEND_MS });

  const cartEmail = async (cartId: string) => (await cartOf(deps.store, cartId)).customerEmail;

  const smtpCall = (step: string, key: string, operationId: string) => ({
    step,
    key,
    operationId,
    boundary: 'smtp' as const,
    breaker: 'smtp:send',
  });

  return {
    async sendRefundNotice(input: RefundNoticeInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('notify_customer', input.key, input.operationId), storeFailure, (a) =>
        deliver(a, { ...input, kind: 'refund_notice' }, refundNoticeMail(input)),
      );
    },

    /**
     * Settles a notice whose hand-over is unknown on a person's word that it was delivered: the outbox
     * entry becomes sent, naming them, so the completion gate's notification check can pass. Sends nothing.
     */
    async confirmNoticeDelivered(input: ConfirmDeliveredInput): Promise<Evidenced<NotificationReceipt>> {
      const call = {
        step: 'notify_customer',
        key: input.key,
        operationId: input.operationId,
        boundary: 'store' as const,
      };
      return deps.attempt(call, storeFailure, (a) => confirmDelivered(a, input));
    },

    /** The occurrence's digest for the operators: one per occurrence, its key built from the occurrence id. */
    async sendDigest(input: DigestInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('digest', input.key, input.occurrenceId), storeFailure, (a) =>
        deliver(
          a,
          {
            key: input.key,
            operationId: input.occurrenceId,
            orderId: '',
            kind: 'digest',
            to: deps.digestTo ?? DEFAULT_DIGEST_TO,
          },
          digestMail(input),
        ),
      );
    },

    /** The checkout's receipt, and its correction: mailed to the cart's customer, as the store holds them. */
    async sendCheckoutReceipt(input: CheckoutMailInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('send_receipt', input.key, input.operationId), storeFailure, async (a) =>
        deliver(
          a,
          { ...input, orderId: input.cartId, kind: 'checkout_receipt', to: await cartEmail(input.cartId) },
          checkoutReceiptMail(input),
        ),
      );
    },

    async sendCheckoutCorrection(input: CheckoutMailInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('send_receipt:compensate', input.key, input.operationId), storeFailure, async (a) =>
        deliver(
          a,
          { ...input, orderId: input.cartId, kind: 'checkout_correction', to: await cartEmail(input.cartId) },
          checkoutCorrectionMail(input),
        ),
      );
    },

    async sendRefundCorrection(input: RefundCorrectionInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('notify_customer:compensate', input.key, input.operationId), storeFailure, (a) =>
        deliver(a, { ...input, kind: 'refund_correction' }, refundCorrectionMail(input)),
      );
    },
  };
}
