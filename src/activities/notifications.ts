import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import nodemailer, { type NodemailerError, type Transporter } from 'nodemailer';
import { FailureType } from '../reliability/failures';
import type { NotificationReceipt } from '../shared';
import { IntentConflictError, type OrderStore, type OutboxEntry } from '../store';

export interface NotificationDeps {
  transport: Transporter;
  store: OrderStore;
  from: string;
}

export interface RefundNoticeInput {
  key: string;
  orderId: string;
  to: string;
  amount: number;
  currency: string;
  refundId: string;
}

export interface RefundCorrectionInput {
  key: string;
  orderId: string;
  to: string;
  refundId: string;
  reason: string;
}

export const MESSAGE_ID_DOMAIN = 'durable-refunds.local';

/** One SMTP connection per send and no pooling, so an activity attempt is exactly one delivery attempt. */
export function createMailTransport(smtpUrl: string): Transporter {
  return nodemailer.createTransport({
    url: smtpUrl,
    pool: false,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
    dnsTimeout: 10_000,
  });
}

/**
 * The Message-ID for an operation key: the same key always yields the same id, so the mailbox can be searched for it.
 * Keys made of [A-Za-z0-9_-] segments joined by ":" map readably; anything else gets a hash so two keys never share an id.
 */
export function messageIdForKey(key: string): string {
  if (/^[A-Za-z0-9_-]+(:[A-Za-z0-9_-]+)*$/.test(key) && key.length <= 200) {
    return `<${key.replace(/:/g, '.')}@${MESSAGE_ID_DOMAIN}>`;
  }
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 16);
  const readable = key.replace(/[^A-Za-z0-9_-]+/g, '-').slice(0, 120);
  return `<${readable}=${hash}@${MESSAGE_ID_DOMAIN}>`;
}

/** Formats minor units in the currency's own number of decimals (1250 usd → "$12.50", 1250 jpy → "¥1,250"). */
export function formatAmount(amount: number, currency: string): string {
  let format: Intl.NumberFormat;
  try {
    format = new Intl.NumberFormat('en-US', { style: 'currency', currency: currency.toUpperCase() });
  } catch {
    throw ApplicationFailure.create({
      type: FailureType.InvalidInput,
      message: `cannot format an amount in unknown currency "${currency}"`,
      nonRetryable: true,
      details: [{ currency }],
    });
  }
  const decimals = format.resolvedOptions().maximumFractionDigits ?? 2;
  return format.format(amount / 10 ** decimals);
}

export function createNotificationActivities(deps: NotificationDeps) {
  const deliver = async (
    entry: { key: string; orderId: string; to: string; kind: OutboxEntry['kind'] },
    subject: string,
    text: string,
  ): Promise<NotificationReceipt> => {
    const messageId = messageIdForKey(entry.key);
    const claimed = await claim(deps.store, { key: entry.key, orderId: entry.orderId, kind: entry.kind, recipient: entry.to, subject, messageId });
    if (claimed.status === 'sent') {
      return { key: entry.key, messageId, recipient: entry.to, providerResponse: claimed.providerResponse ?? '', alreadySent: true };
    }
    let response: string;
    try {
      const info = await deps.transport.sendMail({
        from: deps.from,
        to: entry.to,
        subject,
        text,
        messageId,
        headers: { 'X-Operation-Key': entry.key },
      });
      if (info.rejected?.length) {
        throw Object.assign(new Error(`recipient ${info.rejected.join(', ')} rejected`), { responseCode: 550, response: info.response });
      }
      response = info.response ?? '';
    } catch (err) {
      throw toSendFailure(err as NodemailerError, { key: entry.key, messageId, recipient: entry.to });
    }
    // A crash between the send and this write leaves the entry pending; reconciling it with the mailbox is the next step.
    await deps.store.markNotificationSent(entry.key, response);
    return { key: entry.key, messageId, recipient: entry.to, providerResponse: response, alreadySent: false };
  };

  return {
    async sendRefundNotice(input: RefundNoticeInput): Promise<NotificationReceipt> {
      const amount = formatAmount(input.amount, input.currency);
      return deliver(
        { ...input, kind: 'refund_notice' },
        `Your refund of ${amount} for order ${input.orderId}`,
        [
          'Hello,',
          '',
          `We have refunded ${amount} to your original payment method for order ${input.orderId}.`,
          `Refund reference: ${input.refundId}`,
          '',
          'Depending on your bank it can take 5-10 business days to appear on your statement.',
        ].join('\n'),
      );
    },

    async sendRefundCorrection(input: RefundCorrectionInput): Promise<NotificationReceipt> {
      return deliver(
        { ...input, kind: 'refund_correction' },
        `Correction: your refund for order ${input.orderId} did not go through`,
        [
          'Hello,',
          '',
          `We recently told you that a refund for order ${input.orderId} had been issued. That message was wrong:`,
          'the refund did not go through, and no money has been returned to you for it.',
          `Refund reference: ${input.refundId}`,
          `Reason: ${input.reason}`,
          '',
          'We are sorry for the confusion. Reply to this email if you have any questions.',
        ].join('\n'),
      );
    },
  };
}

async function claim(store: OrderStore, entry: Parameters<OrderStore['claimNotification']>[0]): Promise<OutboxEntry> {
  try {
    return await store.claimNotification(entry);
  } catch (err) {
    if (err instanceof IntentConflictError) {
      throw ApplicationFailure.create({ type: FailureType.IdempotencyKeyReused, message: err.message, nonRetryable: true, details: [{ key: entry.key }] });
    }
    throw err;
  }
}

/** Maps a nodemailer error to our failure types by its SMTP reply, or by the absence of one. */
function toSendFailure(err: NodemailerError, ctx: { key: string; messageId: string; recipient: string }): ApplicationFailure {
  const code = err.responseCode;
  const details = [{ ...ctx, responseCode: code ?? null, response: err.response ?? null, code: err.code ?? null }];
  const message = `sending ${ctx.messageId} to ${ctx.recipient} failed: ${err.response ?? err.message}`;
  // 503 is "bad sequence of commands": a session problem, so a new connection may succeed (nodemailer agrees).
  if (code !== undefined && code >= 500 && code !== 503) {
    return ApplicationFailure.create({ type: FailureType.NotificationRejected, message, nonRetryable: true, details, cause: err });
  }
  if (code === 421 || code === 450 || (code !== undefined && code >= 400 && /rate|too many|throttl|try again later/i.test(err.response ?? ''))) {
    return ApplicationFailure.create({ type: FailureType.RateLimited, message, nonRetryable: false, details, cause: err });
  }
  if (code === undefined && (err.code === 'EENVELOPE' || err.code === 'ECONFIG')) {
    // Refused before anything reached the server (e.g. an unparseable address): no retry can fix it.
    return ApplicationFailure.create({ type: FailureType.InvalidInput, message, nonRetryable: true, details, cause: err });
  }
  return ApplicationFailure.create({ type: FailureType.DependencyUnavailable, message, nonRetryable: false, details, cause: err });
}
