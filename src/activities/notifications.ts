import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import nodemailer, { type NodemailerError, type SentMessageInfo, type Transporter } from 'nodemailer';
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

/**
 * Hard cap on one sendMail. The activity's startToClose is 30 s: an attempt must end with its own, classified
 * failure, not be abandoned by Temporal while sendMail still runs beside the next attempt.
 */
const SEND_DEADLINE_MS = 25_000;

/**
 * One SMTP connection per send and no pooling, so an activity attempt is exactly one delivery attempt.
 * Connecting and the greeting share the 5 s connection deadline, then each reply may take up to 15 s:
 * a server that stalls once fails the attempt within about 20 s, inside the 30 s startToClose.
 */
export function createMailTransport(smtpUrl: string): Transporter {
  return nodemailer.createTransport({
    url: smtpUrl,
    pool: false,
    connectionTimeout: 5_000,
    greetingTimeout: 5_000,
    socketTimeout: 15_000,
    dnsTimeout: 5_000,
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
    const ctx = { key: entry.key, messageId: messageIdForKey(entry.key), recipient: entry.to };
    const claimed = await claim(deps.store, { key: entry.key, orderId: entry.orderId, kind: entry.kind, recipient: entry.to, subject, messageId: ctx.messageId });
    // pending → sending is the hand-over's lock: of two attempts, only the one that moves the entry may send.
    const ours = claimed.status === 'pending' && (await deps.store.markNotificationSending(entry.key));
    if (!ours) {
      const current = (await deps.store.getNotification(entry.key)) ?? claimed;
      if (current.status === 'sent') return { ...ctx, providerResponse: current.providerResponse ?? '', alreadySent: true };
      if (current.status === 'sending') throw outcomeUnknown(ctx, 'a previous attempt');
      // Another attempt held the entry and was refused by the server between our two reads: a retry sends cleanly.
      throw ApplicationFailure.create({
        type: FailureType.DependencyUnavailable,
        message: `another attempt was sending ${ctx.messageId} at the same time and the mail server refused it; retry`,
        nonRetryable: false,
        details: [ctx],
      });
    }

    let info: SentMessageInfo;
    try {
      info = await deps.transport.sendMail({
        from: deps.from,
        to: entry.to,
        subject,
        text,
        messageId: ctx.messageId,
        headers: { 'X-Operation-Key': entry.key },
        signal: AbortSignal.timeout(SEND_DEADLINE_MS),
      });
    } catch (err) {
      const smtpError = err as NodemailerError;
      if (!provenNotAccepted(smtpError)) throw outcomeUnknown(ctx, 'this attempt', smtpError);
      await deps.store.releaseNotification(entry.key);
      throw toSendFailure(smtpError, ctx);
    }
    if (info.rejected?.length) {
      // The server took the message for the other recipients, so the entry stays sending: a resend would repeat it.
      if (!info.accepted?.length) await deps.store.releaseNotification(entry.key);
      const rejected = Object.assign(new Error(`recipient ${info.rejected.join(', ')} rejected`), { responseCode: 550, response: info.response });
      throw toSendFailure(rejected, ctx);
    }
    const response = info.response ?? '';
    // If this write fails the entry stays sending, and the next attempt reports the unknown outcome instead of resending.
    await deps.store.markNotificationSent(entry.key, response);
    return { ...ctx, providerResponse: response, alreadySent: false };
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

/** Errors a connection attempt fails with before any SMTP session exists. */
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * True only when the error proves the server did not accept the message: it answered with a refusal (at the
 * greeting, EHLO, MAIL FROM, RCPT TO, DATA or after the body: RFC 5321 gives the server the message only with
 * its 250), no session ever began, or nodemailer refused before writing anything. A dropped connection, an idle
 * timeout or our own deadline may come after the server stored the message and lost only its reply.
 */
function provenNotAccepted(err: NodemailerError): boolean {
  if (err.responseCode !== undefined && err.responseCode >= 400) return true;
  if (err.command === 'API' && err.code !== 'ESTREAM') return true;
  if (err.code === 'EDNS') return true;
  if (err.code === 'ETIMEDOUT') return err.timeoutType === 'CONNECT_TIMEOUT' || err.timeoutType === 'GREETING_TIMEOUT';
  return err.originalCode !== undefined && CONNECT_FAILURES.has(err.originalCode);
}

function outcomeUnknown(ctx: { key: string; messageId: string; recipient: string }, who: string, cause?: NodemailerError): ApplicationFailure {
  const why = cause ? ` (${cause.code ?? cause.name}: ${cause.message})` : '';
  return ApplicationFailure.create({
    type: FailureType.NotificationOutcomeUnknown,
    message:
      `${who} handed the message ${ctx.messageId} for ${ctx.recipient} to the mail server and its outcome is unknown${why}; ` +
      `check the mailbox for that Message-ID before any resend`,
    nonRetryable: true,
    details: [{ ...ctx, code: cause?.code ?? null, command: cause?.command ?? null }],
    cause,
  });
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
