import type { AttentionRun } from '../inspect/attention';
import { Context } from '@temporalio/activity';
import nodemailer, { type NodemailerError, type SentMessageInfo, type Transporter } from 'nodemailer';
import { smtpTlsFor } from '../config';
import { HEALTH_FAILURES } from '../reliability/circuit-breaker';
import { maskEmails } from '../reliability/redaction';
import { resendsUnknownEmail, type RecoveryPolicy } from '../reliability/policy';
import type { FailureDetails } from '../reliability/taxonomy';
import { messageIdForKey, type Evidenced, type NotificationReceipt } from '../contract';
import { IntentConflictError, type OrderStore, type OutboxEntry } from '../store';
import { Classified, type AttemptRunner } from './attempt';
import { currentAttemptScope, recordTransportRequest } from './attempt-scope';
import { classifySmtpError } from './smtp-failures';
import { storeFailure } from './store-failures';

export const DEFAULT_DIGEST_TO = 'refund-ops@durable-refunds.test';

export interface NotificationDeps {
  /** Who reads the operators' digest (DIGEST_TO). */
  digestTo?: string;
  transport: Transporter;
  store: OrderStore;
  from: string;
  attempt: AttemptRunner;
  policy: RecoveryPolicy;
  /** One sendMail, all of it; must end inside the smtp activity's start-to-close. */
  sendDeadlineMs?: number;
}

/** The recipient is read from the order in the store: a customer's address never travels through workflow history. */
export interface RefundNoticeInput {
  key: string;
  operationId: string;
  orderId: string;
  amount: number;
  currency: string;
  refundId: string;
  /** When a person approved resending a notice whose hand-over ended unknown: that hand-over, begun before it, is resent once (same Message-ID). */
  resendApprovedAt?: string;
  /** The hand-over the person judged (its `sendingSince`, by the store's clock, from the failure they saw): only it is resent. */
  approvedHandOver?: string;
}

/** A person's word that a notice whose hand-over is unknown was delivered (the confirm-delivered decision). */
export interface ConfirmDeliveredInput {
  key: string;
  operationId: string;
  /** Who confirmed it, and their evidence. */
  by: string;
  reason: string;
}

export interface DigestInput {
  /** `digest:<occurrence id>`. */
  key: string;
  occurrenceId: string;
  /** The occurrence as people name it: its scheduled instant (UTC). */
  label: string;
  /** How many runs wait; the first of them are listed. */
  total: number;
  runs: AttentionRun[];
}

function digestText(input: DigestInput): string {
  if (input.total === 0) return `No refund run waits for a person (${input.occurrenceId}).`;
  const lines = input.runs.map((r) => `- ${r.workflowId} (order ${r.orderId ?? '?'}): ${r.execution}, ${r.status ?? '?'} at ${r.step ?? '?'}, refund ${r.effect ?? '?'}; ${r.verdict ?? ''}`);
  const more = input.total > input.runs.length ? [`…and ${input.total - input.runs.length} more: npm run inspect -- --attention`] : [];
  return [`${input.total} refund run(s) wait for a person (${input.occurrenceId}):`, '', ...lines, ...more, '', 'Inspect one with npm run inspect -- <workflow id>.'].join('\n');
}

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

/**
 * One SMTP connection per send and no pooling, so an activity attempt is exactly one delivery attempt.
 * Connecting and the greeting share the 5 s connection deadline, then each reply may take up to 15 s:
 * a server that stalls once fails the attempt within about 20 s, inside the 30 s startToClose.
 */
export interface SmtpSettings {
  /** Credentials kept out of the URL; a URL's own user:password is used when these are not given. */
  auth?: { user: string; pass: string };
  /** off: plain (the local server); starttls: STARTTLS required before anything is sent; implicit: TLS from the first byte. */
  tls: 'off' | 'starttls' | 'implicit';
  /** false only for a relay with a certificate this host cannot verify (a test relay); never for a real one. */
  rejectUnauthorized: boolean;
}

export function createMailTransport(smtpUrl: string, settings?: SmtpSettings): Transporter {
  const url = new URL(smtpUrl);
  const tls = settings?.tls ?? smtpTlsFor(smtpUrl);
  const fromUrl = url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined;
  return nodemailer.createTransport({
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port || (tls === 'implicit' ? 465 : 587)),
    secure: tls === 'implicit',
    requireTLS: tls === 'starttls',
    ignoreTLS: tls === 'off',
    tls: { rejectUnauthorized: settings?.rejectUnauthorized ?? true },
    auth: settings?.auth ?? fromUrl,
    pool: false,
    connectionTimeout: 5_000,
    greetingTimeout: 5_000,
    socketTimeout: 15_000,
    dnsTimeout: 5_000,
  });
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
      throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'unknown_currency', `cannot format an amount in unknown currency "${currency}"`);
    }
    formats.set(code, (known = { format, decimals: format.resolvedOptions().maximumFractionDigits ?? 2 }));
  }
  return known.format.format(amount / 10 ** known.decimals);
}

export function createNotificationActivities(deps: NotificationDeps) {
  const { store } = deps;
  const sendDeadlineMs = deps.sendDeadlineMs ?? 25_000;
  const actor = () => Context.current().info.workflowExecution?.workflowId ?? 'activity';
  // The policy's row for a send whose outcome is unknown: hand to a person, or resend with the same Message-ID.
  // A hand-over younger than one send's deadline may still be running somewhere; an older one ended without telling.
  // Its age is read on the clock that stamped it, the store's: hosts whose clocks differ agree on it.
  const handOverMs = sendDeadlineMs + 1000;
  // The stamp of this attempt's own hand-over, for the failure a person judges (best effort: the failure stands without it).
  const ownStamp = async (key: string) => (await store.getNotification(key).catch(() => undefined))?.sendingSince ?? null;
  /** How long the entry's hand-over may still be running (0: it ended, or never began). */
  const inFlightFor = async (entry: OutboxEntry) =>
    entry.sendingSince === null ? 0 : Math.max(0, Date.parse(entry.sendingSince) + handOverMs - (await store.operations.clock()));
  const inFlight = async (entry: OutboxEntry) => (await inFlightFor(entry)) > 0;

  const deliver = async (
    entry: { key: string; operationId: string; orderId: string; kind: OutboxEntry['kind']; resendApprovedAt?: string; approvedHandOver?: string; to?: string },
    subject: string,
    text: string,
  ): Promise<NotificationReceipt> => {
    let to = entry.to;
    if (to === undefined) {
      // A customer is mailed at the address the order holds, never one passed along.
      const order = await store.getOrder(entry.orderId);
      if (!order) throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'order_not_found', `order ${entry.orderId} does not exist; nothing was sent`);
      to = order.customerEmail;
    }
    const ctx = { key: entry.key, messageId: messageIdForKey(entry.key), recipient: maskEmails(to) };
    const claimed = await claim(store, { key: entry.key, orderId: entry.orderId, kind: entry.kind, recipient: to, subject, messageId: ctx.messageId });
    // pending → sending is the hand-over's lock: of two attempts, only the one that moves the entry may send.
    const ours = claimed.status === 'pending' && (await store.markNotificationSending(entry.key));
    if (!ours) {
      const current = (await store.getNotification(entry.key)) ?? claimed;
      if (current.status === 'sent') return { ...ctx, providerResponse: current.providerResponse ?? '', alreadySent: true };
      if (current.status === 'sending') {
        const facts = { ...ctx, sendingSince: current.sendingSince };
        // A person's approval covers the hand-over they judged, however young; otherwise only the policy's row resends
        // one whose outcome is unknown, once it has ended.
        const approved = approvedResend(current, entry);
        // Another attempt (another run of the same operation) is handing it over right now: ask again once it is done.
        if (!approved && (await inFlight(current))) throw sendInProgress(facts, `another attempt is sending ${ctx.messageId} right now`);
        if (!approved && !resendsUnknownEmail(deps.policy)) throw outcomeUnknown(facts, 'a previous attempt');
        // Resending takes the hand-over over, re-stamped: of two attempts only one resends, and a retry of
        // ours sees a hand-over of its own, which no approval covers, so it never resends again.
        const notBefore = approved && !entry.approvedHandOver ? new Date(Date.parse(entry.resendApprovedAt!) + 1).toISOString() : undefined;
        if (!(await store.takeOverNotification(entry.key, current.sendingSince!, { endedAfterMs: approved ? 0 : handOverMs, ...(notBefore && { notBefore }) }))) {
          throw sendInProgress(facts, `another attempt took over ${ctx.messageId} just now`);
        }
      }
      if (current.status === 'pending') {
        // Another attempt held the entry and was refused by the server between our two reads: a retry sends cleanly.
        throw new Classified('STATE_CONFLICT', 'not_executed', 'concurrent_attempt', `another attempt was sending ${ctx.messageId} at the same time and the mail server refused it; retry`, { provider: ctx });
      }
      // The policy, or a person's approved decision, says a send of unknown outcome is resent, with the same Message-ID so that receivers can deduplicate it.
    }

    let info: SentMessageInfo;
    const scope = currentAttemptScope();
    const handedOver = () => recordTransportRequest(scope, { method: 'SMTP', target: 'DATA', idempotencyKey: entry.key });
    try {
      info = await deps.transport.sendMail({
        from: deps.from,
        to,
        subject,
        text,
        messageId: ctx.messageId,
        headers: { 'X-Operation-Key': entry.key },
        signal: AbortSignal.timeout(sendDeadlineMs),
      });
      handedOver();
    } catch (err) {
      const c = classifySmtpError(err as NodemailerError);
      // A session that never began reached no server; any other counts as a request it received.
      if (!NO_SESSION.has(c.reason)) handedOver();
      if (c.certainty !== 'not_executed') throw outcomeUnknown({ ...ctx, sendingSince: await ownStamp(entry.key) }, 'this attempt', err as NodemailerError);
      await store.releaseNotification(entry.key);
      throw new Classified(c.code, c.certainty, c.reason, `sending ${ctx.messageId} to ${ctx.recipient} failed: ${(err as NodemailerError).response ?? (err as Error).message}`, {
        retryAfterMs: c.retryAfterMs,
        provider: { ...ctx, ...c.facts },
        cause: err,
        health: HEALTH_FAILURES.has(c.code),
      });
    }
    if (info.rejected?.length) {
      if (info.accepted?.length) {
        // The server took the message for the other recipients, so the entry stays sending: a resend would repeat it.
        throw new Classified('PARTIAL_OUTCOME', 'partial', 'some_recipients_rejected', `the mail server accepted ${ctx.messageId} for some recipients only`, { provider: ctx });
      }
      await store.releaseNotification(entry.key);
      throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'recipient_rejected', `recipient ${ctx.recipient} rejected: ${info.response ?? ''}`, { provider: ctx });
    }
    const response = info.response ?? '';
    try {
      await store.markNotificationSent(entry.key, response, { operationId: entry.operationId, actor: actor() });
    } catch (err) {
      // Delivered, its record lost: the entry stays sending, and the next attempt reports the unknown outcome instead
      // of resending. The step took effect, whatever the store said: never "not executed".
      const c = storeFailure(err);
      throw new Classified(c.code, 'completed', 'delivery_not_recorded', `the mail server accepted ${ctx.messageId} (${response}), but its record could not be written: ${c.message}`, {
        provider: { ...ctx, providerResponse: response },
        cause: err,
      });
    }
    return { ...ctx, providerResponse: response, alreadySent: false };
  };

  const smtpCall = (step: string, key: string, operationId: string) => ({ step, key, operationId, boundary: 'smtp' as const, breaker: 'smtp:send' });

  return {
    async sendRefundNotice(input: RefundNoticeInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('notify_customer', input.key, input.operationId), storeFailure, () => {
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
      });
    },

    /**
     * Settles a notice whose hand-over is unknown on a person's word that it was delivered: the outbox
     * entry becomes sent, naming them, so the completion gate's notification check can pass. Sends nothing.
     */
    async confirmNoticeDelivered(input: ConfirmDeliveredInput): Promise<Evidenced<NotificationReceipt>> {
      const call = { step: 'notify_customer', key: input.key, operationId: input.operationId, boundary: 'store' as const };
      return deps.attempt(call, storeFailure, async () => {
        // A hand-over still in flight may yet be refused and released: only one that ended without telling is unknown.
        const current = await store.getNotification(input.key);
        const live = current?.status === 'sending' ? await inFlightFor(current) : 0;
        if (current && live > 0) {
          // The retry comes once that hand-over's deadline has passed.
          throw new Classified('STATE_CONFLICT', 'not_executed', 'send_in_progress', `${current.messageId} is being handed over right now; confirm its delivery once that attempt is done`, {
            provider: { key: input.key, messageId: current.messageId },
            retryAfterMs: live,
          });
        }
        const entry = await store.confirmNotificationDelivered(input.key, { by: input.by, reason: input.reason, operationId: input.operationId, actor: actor() });
        if (entry.status !== 'sent') {
          // Nothing to retry: only a person's next decision (retry-step, which sends it) moves it on.
          throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'no_unknown_handover', `${entry.messageId} is ${entry.status}: no hand-over of it is unknown, so there is no delivery to confirm`, {
            provider: { key: input.key, messageId: entry.messageId },
          });
        }
        return { key: input.key, messageId: entry.messageId, recipient: maskEmails(entry.recipient), providerResponse: entry.providerResponse ?? '', alreadySent: true };
      });
    },

    /** The occurrence's digest for the operators: one per occurrence, its key built from the occurrence id. */
    async sendDigest(input: DigestInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('digest', input.key, input.occurrenceId), storeFailure, () =>
        deliver(
          { key: input.key, operationId: input.occurrenceId, orderId: '', kind: 'digest', to: deps.digestTo ?? DEFAULT_DIGEST_TO },
          `Refunds waiting for a person: ${input.label}`,
          digestText(input),
        ),
      );
    },

    async sendRefundCorrection(input: RefundCorrectionInput): Promise<Evidenced<NotificationReceipt>> {
      return deps.attempt(smtpCall('notify_customer:compensate', input.key, input.operationId), storeFailure, () =>
        deliver(
          { ...input, kind: 'refund_correction' },
          `Correction: your refund for order ${input.orderId} did not go through`,
          [
            'Hello,',
            '',
            `We recently told you that a refund for order ${input.orderId} had been issued. That message was wrong:`,
            `${CORRECTION_REASONS[input.reason] ?? CORRECTION_REASONS.refund_failed}.`,
            `Refund reference: ${input.refundId}`,
            '',
            'We are sorry for the confusion. Reply to this email if you have any questions.',
          ].join('\n'),
        ),
      );
    },
  };
}

/**
 * Whether a person's approval covers this hand-over: the one they judged, named by its stamp. An approval
 * from a run begun before stamps were named covers one stamped before it (the workflow's clock against the
 * store's: kept for those runs only).
 */
function approvedResend(current: OutboxEntry, approval: { resendApprovedAt?: string; approvedHandOver?: string }): boolean {
  if (approval.resendApprovedAt === undefined || current.sendingSince === null) return false;
  if (approval.approvedHandOver !== undefined) return current.sendingSince === approval.approvedHandOver;
  return Date.parse(current.sendingSince) < Date.parse(approval.resendApprovedAt);
}

function sendInProgress(facts: FailureDetails['provider'], what: string): Classified {
  return new Classified('STATE_CONFLICT', 'may_have_executed', 'send_in_progress', `${what}; look again when it is done`, { provider: facts });
}

/** Failures that happen before any SMTP session with the server exists. */
const NO_SESSION = new Set(['connection_refused', 'dns_failed', 'connect_timeout', 'client_refused', 'envelope_invalid']);

async function claim(store: OrderStore, entry: Parameters<OrderStore['claimNotification']>[0]): Promise<OutboxEntry> {
  try {
    return await store.claimNotification(entry);
  } catch (err) {
    if (err instanceof IntentConflictError) {
      throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'intent_conflict', maskEmails(err.message), { provider: { key: entry.key } });
    }
    throw err;
  }
}

function outcomeUnknown(ctx: { key: string; messageId: string; recipient: string; sendingSince: string | null }, who: string, cause?: NodemailerError): Classified {
  const why = cause ? ` (${cause.code ?? cause.name}: ${cause.message})` : '';
  return new Classified(
    'UNKNOWN_OUTCOME',
    'may_have_executed',
    who === 'this attempt' ? 'connection_lost_after_handover' : 'previous_attempt_unconfirmed',
    `${who} handed the message ${ctx.messageId} for ${ctx.recipient} to the mail server and its outcome is unknown${why}; ` +
      'check the mailbox for that Message-ID before any resend',
    // A connection lost after the hand-over says something about the server; an earlier attempt's open outcome does not.
    { provider: { ...ctx, code: cause?.code ?? null, command: cause?.command ?? null }, cause, health: cause !== undefined },
  );
}
