// The notification activities: each hands one email to the mail server, at most once per claim on its outbox entry
// (outbox.ts), by a deadline fixed before its stamp, and records the server's answer (or a person's word on it).
import type { NodemailerError, SentMessageInfo, Transporter } from 'nodemailer';
import { maskEmails } from '../reliability/redaction';
import type { RecoveryPolicy } from '../reliability/policy';
import { messageIdForKey, type Evidenced, type NotificationReceipt } from '../contract';
import type { OrderStore } from '../store';
import { Classified, recordingEffect, stepCall, type Attempt, type AttemptRunner } from './attempt';
import type { MessageLog } from './message-log';
import { activityMetrics, type ActivityMetrics } from './activity-metrics';
import { cartOf } from './checkout';
import { checkoutMail, type CheckoutMailInput, type CheckoutMailKind } from './checkout-mail';
import { DEFAULT_DIGEST_TO, digestMail, type DigestInput } from './attention-digest';
import {
  awaitingLog,
  createOutbox,
  outcomeUnknown,
  type ConfirmDeliveredInput,
  type MailText,
  type OutboxMail,
} from './outbox';
import { refundCorrectionMail } from './refund-correction';
import { refundNoticeMail } from './refund-notice';
import { attemptTimeSpent, beforeRequest, sendDeadline, SMTP_SEND_MARGIN_MS } from './request-deadline';
import { reachedServer, smtpFailure } from './smtp-failures';
import { storeFailure } from './store-failures';

export interface NotificationDeps {
  /** Who reads the operators' digest (DIGEST_TO). */
  digestTo?: string;
  mail: Transporter;
  store: OrderStore;
  mailFrom: string;
  attempt: AttemptRunner;
  policy: RecoveryPolicy;
  /** The longest one send may take (tests shorten it); what is left of the attempt cuts it shorter. */
  maxSendMs?: number;
  /** The mail provider's log of accepted messages (MAIL_LOG_URL): hand-overs whose outcome is unknown are settled there. */
  messageLog?: MessageLog;
  /** Where hand-overs are counted (default: each activity's own meter). */
  metrics?: ActivityMetrics;
}

/** Outside an attempt nothing else bounds a send; inside one, what is left of its start-to-close does. */
const MAX_SEND_MS = 5 * 60_000;

export function createNotificationActivities(deps: NotificationDeps) {
  const { store } = deps;
  const maxSendMs = deps.maxSendMs ?? MAX_SEND_MS;
  const metricsNow = deps.metrics ?? activityMetrics();
  const { claimHandOver, confirmDelivered } = createOutbox(deps);

  const handOver = async (
    attempt: Attempt,
    entry: OutboxMail,
    { subject, text }: MailText,
  ): Promise<NotificationReceipt> => {
    const { key, orderId, kind, to } = entry;
    const ctx = { key, messageId: messageIdForKey(key), recipient: maskEmails(to) };
    // Sent already: its receipt. Otherwise this attempt now holds the hand-over, or the claim said why not.
    const claim = { key, orderId, kind, recipient: to, subject, messageId: ctx.messageId };
    // The send's deadline, fixed before its stamp: the stamp records it as the hand-over's bound.
    const deadline = sendDeadline(attempt, maxSendMs, SMTP_SEND_MARGIN_MS);
    const held = await claimHandOver(attempt, claim, entry, ctx, deadline.onWireForMs);
    if ('receipt' in held) return held.receipt;
    // Only this attempt's own hand-over is freed: another's, begun once this one's bound had passed, is left alone.
    const release = () => store.releaseNotification(key, held.stamp);

    await beforeRequest(attempt);
    // A worker stalled since its stamp (the store, the ledger, a pause) sends nothing that could outlive its bound.
    const timeout = deadline.left();
    if (!timeout) {
      await release();
      throw attemptTimeSpent();
    }
    const email = { from: deps.mailFrom, to, subject, text, messageId: ctx.messageId };
    const info: SentMessageInfo = await deps.mail
      .sendMail({ ...email, headers: { 'X-Operation-Key': key }, signal: AbortSignal.timeout(timeout) })
      .catch(async (err: NodemailerError) => {
        const failure = smtpFailure(err, ctx);
        if (reachedServer(failure)) attempt.requests += 1;
        if (failure.certainty !== 'not_executed') {
          const facts = { ...ctx, sendingSince: held.stamp };
          // With a message log, the next attempt asks it once the message could show there: past this send's bound.
          if (deps.messageLog) {
            const logShowsIn = deadline.offWireBy + deps.messageLog.consistencyMs - Date.now();
            throw awaitingLog(facts, Math.max(0, logShowsIn), err);
          }
          throw outcomeUnknown(facts, 'this attempt', err);
        }
        await release();
        throw failure;
      });
    attempt.requests += 1;
    if (info.rejected?.length) {
      if (info.accepted?.length) {
        // The server took the message for the other recipients, so the entry stays sending: a resend would repeat it.
        const message = `the mail server accepted ${ctx.messageId} for some recipients only`;
        throw new Classified('PARTIAL_OUTCOME', 'partial', 'some_recipients_rejected', message, { provider: ctx });
      }
      await release();
      const message = `recipient ${ctx.recipient} rejected: ${info.response ?? ''}`;
      throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'recipient_rejected', message, { provider: ctx });
    }
    const response = info.response ?? '';
    try {
      await recordingEffect(attempt, () =>
        store.markNotificationSent(key, response, { operationId: entry.operationId, actor: attempt.actor }),
      );
    } catch (err) {
      // Delivered, its record lost: the entry stays sending, and the next attempt reports the unknown outcome instead
      // of resending. The step took effect, whatever the store said: never "not executed".
      const c = storeFailure(err);
      const message = `the mail server accepted ${ctx.messageId} (${response}), but its record could not be written: ${c.message}`;
      const provider = { ...ctx, providerResponse: response };
      throw new Classified(c.code, 'completed', 'delivery_not_recorded', message, { provider, cause: err });
    }
    return { ...ctx, providerResponse: response, alreadySent: false };
  };

  /** An email's step: one attempt through the mail server's breaker, composed within it, its hand-over counted by outcome. */
  const mailStep = (
    step: string,
    key: string,
    operationId: string,
    compose: () => Promise<[OutboxMail, MailText]> | [OutboxMail, MailText],
  ) =>
    deps.attempt(stepCall(step, { key, operationId }, 'smtp', 'smtp:send'), storeFailure, async (a) => {
      const [entry, mail] = await compose();
      const metrics = metricsNow();
      try {
        const receipt = await handOver(a, entry, mail);
        metrics.handedOver(receipt.alreadySent ? 'already_sent' : 'completed');
        return receipt;
      } catch (err) {
        if (err instanceof Classified) metrics.handedOver(err.certainty);
        throw err;
      }
    });

  /** A customer's mail about a refund: to the address the order holds, never one passed along. */
  const orderMail =
    <I extends Omit<OutboxMail, 'kind' | 'to'>>(step: string, kind: OutboxMail['kind'], text: (input: I) => MailText) =>
    (input: I) =>
      mailStep(step, input.key, input.operationId, async () => {
        const mail = text(input);
        const order = await store.getOrder(input.orderId);
        if (order) return [{ ...input, kind, to: order.customerEmail }, mail];
        const message = `order ${input.orderId} does not exist; nothing was sent`;
        throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'order_not_found', message);
      });

  /** The checkout's receipt, or its correction: mailed to the cart's customer, as the store holds them. */
  const cartMail = (kind: CheckoutMailKind, step: string) => (input: CheckoutMailInput) =>
    mailStep(step, input.key, input.operationId, async () => {
      const to = (await cartOf(store, input.cartId)).customerEmail;
      return [{ ...input, orderId: input.cartId, kind, to }, checkoutMail(kind, input)];
    });

  return {
    sendRefundNotice: orderMail('notify_customer', 'refund_notice', refundNoticeMail),

    /** Settles an unknown hand-over as sent on a person's word (naming them), for the completion gate. Sends nothing. */
    async confirmNoticeDelivered(input: ConfirmDeliveredInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(stepCall('notify_customer', input, 'store'), storeFailure, (a) => confirmDelivered(a, input));
    },

    /** The occurrence's digest for the operators: one per occurrence, its key built from the occurrence id. */
    sendDigest: (input: DigestInput) =>
      mailStep('digest', input.key, input.occurrenceId, () => {
        const entry = { key: input.key, operationId: input.occurrenceId, orderId: '', kind: 'digest' as const };
        return [{ ...entry, to: deps.digestTo ?? DEFAULT_DIGEST_TO }, digestMail(input)];
      }),

    sendCheckoutReceipt: cartMail('checkout_receipt', 'send_receipt'),
    sendCheckoutCorrection: cartMail('checkout_correction', 'send_receipt:compensate'),

    sendRefundCorrection: orderMail('notify_customer:compensate', 'refund_correction', refundCorrectionMail),
  };
}
