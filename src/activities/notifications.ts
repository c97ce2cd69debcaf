// The notification activities: each sends one email through the outbox's hand-over, once, or settles one.
import type { Transporter } from 'nodemailer';
import type { RecoveryPolicy } from '../reliability/policy';
import type { Evidenced, NotificationReceipt } from '../contract';
import type { OrderStore } from '../store';
import type { AttemptRunner } from './attempt';
import type { MessageLog } from './message-log';
import { cartOf } from './checkout';
import { checkoutMail, type CheckoutMailInput, type CheckoutMailKind } from './checkout-mail';
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

  const smtpCall = (step: string, key: string, operationId: string) => ({
    step,
    key,
    operationId,
    boundary: 'smtp' as const,
    breaker: 'smtp:send',
  });

  /** The checkout's receipt, or its correction: mailed to the cart's customer, as the store holds them. */
  const cartMail =
    (kind: CheckoutMailKind, step: string) =>
    (input: CheckoutMailInput): Promise<Evidenced<NotificationReceipt>> =>
      deps.attempt(smtpCall(step, input.key, input.operationId), storeFailure, async (a) => {
        const to = (await cartOf(deps.store, input.cartId)).customerEmail;
        return deliver(a, { ...input, orderId: input.cartId, kind, to }, checkoutMail(kind, input));
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

    sendCheckoutReceipt: cartMail('checkout_receipt', 'send_receipt'),
    sendCheckoutCorrection: cartMail('checkout_correction', 'send_receipt:compensate'),

    async sendRefundCorrection(input: RefundCorrectionInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('notify_customer:compensate', input.key, input.operationId), storeFailure, (a) =>
        deliver(a, { ...input, kind: 'refund_correction' }, refundCorrectionMail(input)),
      );
    },
  };
}
