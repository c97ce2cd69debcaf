// Hands one email to the mail server, at most once per claim on its outbox entry (outbox-claim.ts), and records the
// outcome: the server's answer, or a person's word that a hand-over whose outcome is unknown was delivered. A send
// ends by its deadline (request-deadline.ts: what is left of the attempt), fixed before its stamp and recorded with it.
import { Context } from '@temporalio/activity';
import type { NodemailerError, SentMessageInfo, Transporter } from 'nodemailer';
import { HEALTH_FAILURES } from '../reliability/circuit-breaker';
import { refundMetrics } from '../observability/metrics';
import { maskEmails } from '../reliability/redaction';
import type { RecoveryPolicy } from '../reliability/policy';
import { messageIdForKey, type NotificationReceipt } from '../contract';
import type { OrderStore, OutboxEntry } from '../store';
import { Classified, recordingEffect, type Attempt } from './attempt';
import type { MessageLog } from './message-log';
import { awaitingLog, createOutboxClaim, outcomeUnknown, type ResendApproval } from './outbox-claim';
import {
  attemptTimeSpent,
  beforeRequest,
  recordTransportRequest,
  sendDeadline,
  SMTP_SEND_MARGIN_MS,
} from './request-deadline';
import { classifySmtpError } from './smtp-failures';
import { storeFailure } from './store-failures';

export interface HandOverDeps {
  transport: Transporter;
  store: OrderStore;
  from: string;
  policy: RecoveryPolicy;
  /** The longest one send may take; what is left of the attempt cuts it shorter. */
  maxSendMs: number;
  /** The provider's log of accepted messages: a hand-over whose outcome is unknown is settled there, not by a person. */
  messageLog?: MessageLog;
}

/** The outbox entry an email is handed over as; `to` only for operators' mail (a customer's comes from the order). */
export interface OutboxMail extends ResendApproval {
  key: string;
  operationId: string;
  orderId: string;
  kind: OutboxEntry['kind'];
  to?: string;
}

/** A person's word that a notice whose hand-over is unknown was delivered (the confirm-delivered decision). */
export interface ConfirmDeliveredInput {
  key: string;
  operationId: string;
  /** Who confirmed it, and their evidence. */
  by: string;
  reason: string;
  /** The stamp of the hand-over the person judged (absent from runs begun before it was sent: the current one). */
  judged?: string;
}

export interface MailText {
  subject: string;
  text: string;
}

export function createOutboxHandOver(deps: HandOverDeps) {
  const { store } = deps;
  const { claimHandOver, inFlightFor } = createOutboxClaim(deps);

  const handOver = async (
    attempt: Attempt,
    entry: OutboxMail,
    { subject, text }: MailText,
  ): Promise<NotificationReceipt> => {
    let to = entry.to;
    if (to === undefined) {
      // A customer is mailed at the address the order holds, never one passed along.
      const order = await store.getOrder(entry.orderId);
      if (!order)
        throw new Classified(
          'PERMANENT_BUSINESS',
          'not_executed',
          'order_not_found',
          `order ${entry.orderId} does not exist; nothing was sent`,
        );
      to = order.customerEmail;
    }
    const ctx = { key: entry.key, messageId: messageIdForKey(entry.key), recipient: maskEmails(to) };
    // Sent already: its receipt. Otherwise this attempt now holds the hand-over, or the claim said why not.
    const claim = {
      key: entry.key,
      orderId: entry.orderId,
      kind: entry.kind,
      recipient: to,
      subject,
      messageId: ctx.messageId,
    };
    // The send's deadline, fixed before its stamp: the stamp records it as the hand-over's bound.
    const deadline = sendDeadline(attempt, deps.maxSendMs, SMTP_SEND_MARGIN_MS);
    const held = await claimHandOver(attempt, claim, entry, ctx, deadline.onWireForMs);
    if ('receipt' in held) return held.receipt;
    // Only this attempt's own hand-over is freed: another's, begun once this one's bound had passed, is left alone.
    const release = () => store.releaseNotification(entry.key, held.stamp);

    let info: SentMessageInfo;
    const handedOver = () =>
      recordTransportRequest(attempt, { method: 'SMTP', target: 'DATA', idempotencyKey: entry.key });
    await beforeRequest(attempt);
    // A worker stalled since its stamp (the store, the ledger, a pause) sends nothing that could outlive its bound.
    const timeout = deadline.left();
    if (!timeout) {
      await release();
      throw attemptTimeSpent();
    }
    try {
      info = await deps.transport.sendMail({
        from: deps.from,
        to,
        subject,
        text,
        messageId: ctx.messageId,
        headers: { 'X-Operation-Key': entry.key },
        signal: AbortSignal.timeout(timeout),
      });
      handedOver();
    } catch (err) {
      const c = classifySmtpError(err as NodemailerError);
      // A session that never began reached no server; any other counts as a request it received.
      if (!NO_SESSION.has(c.reason)) handedOver();
      if (c.certainty !== 'not_executed') {
        const facts = { ...ctx, sendingSince: held.stamp };
        // With a message log, the next attempt asks it once the message could show there: past this send's bound.
        if (deps.messageLog) {
          const logShowsIn = deadline.offWireBy + deps.messageLog.consistencyMs - Date.now();
          throw awaitingLog(facts, Math.max(0, logShowsIn), err as Error);
        }
        throw outcomeUnknown(facts, 'this attempt', err as NodemailerError);
      }
      await release();
      throw new Classified(
        c.code,
        c.certainty,
        c.reason,
        `sending ${ctx.messageId} to ${ctx.recipient} failed: ${(err as NodemailerError).response ?? (err as Error).message}`,
        {
          retryAfterMs: c.retryAfterMs,
          provider: { ...ctx, ...c.facts },
          cause: err,
          health: HEALTH_FAILURES.has(c.code),
        },
      );
    }
    if (info.rejected?.length) {
      if (info.accepted?.length) {
        // The server took the message for the other recipients, so the entry stays sending: a resend would repeat it.
        throw new Classified(
          'PARTIAL_OUTCOME',
          'partial',
          'some_recipients_rejected',
          `the mail server accepted ${ctx.messageId} for some recipients only`,
          { provider: ctx },
        );
      }
      await release();
      throw new Classified(
        'PERMANENT_BUSINESS',
        'not_executed',
        'recipient_rejected',
        `recipient ${ctx.recipient} rejected: ${info.response ?? ''}`,
        { provider: ctx },
      );
    }
    const response = info.response ?? '';
    try {
      await recordingEffect(attempt, () =>
        store.markNotificationSent(entry.key, response, { operationId: entry.operationId, actor: attempt.actor }),
      );
    } catch (err) {
      // Delivered, its record lost: the entry stays sending, and the next attempt reports the unknown outcome instead
      // of resending. The step took effect, whatever the store said: never "not executed".
      const c = storeFailure(err);
      throw new Classified(
        c.code,
        'completed',
        'delivery_not_recorded',
        `the mail server accepted ${ctx.messageId} (${response}), but its record could not be written: ${c.message}`,
        { provider: { ...ctx, providerResponse: response }, cause: err },
      );
    }
    return { ...ctx, providerResponse: response, alreadySent: false };
  };

  /** Each hand-over counted by outcome: sent, already sent, refused, partial or unknown. */
  const deliver = async (attempt: Attempt, entry: OutboxMail, mail: MailText): Promise<NotificationReceipt> => {
    const metrics = refundMetrics(Context.current().metricMeter);
    try {
      const receipt = await handOver(attempt, entry, mail);
      metrics.handedOver(receipt.alreadySent ? 'already_sent' : 'completed');
      return receipt;
    } catch (err) {
      if (err instanceof Classified) metrics.handedOver(err.certainty);
      throw err;
    }
  };

  /** Records a person's word that a hand-over whose outcome is unknown was delivered: the entry becomes sent, naming them. */
  const confirmDelivered = async (attempt: Attempt, input: ConfirmDeliveredInput): Promise<NotificationReceipt> => {
    // The retry comes once that hand-over's bound has passed.
    const stillSending = (entry: OutboxEntry, what: string, retryAfterMs: number) =>
      new Classified(
        'STATE_CONFLICT',
        'not_executed',
        'send_in_progress',
        `${entry.messageId} ${what}; confirm its delivery once that attempt is done`,
        { provider: { key: input.key, messageId: entry.messageId }, retryAfterMs },
      );
    // A hand-over still in flight may yet be refused and released: only one that ended without telling is unknown.
    const current = await store.getNotification(input.key);
    const live = current?.status === 'sending' ? await inFlightFor(current) : 0;
    if (current && live > 0) throw stillSending(current, 'is being handed over right now', live);
    // A hand-over judged ended stays ended (its bound never moves): the store records the person's word only while
    // its stamp is still the current one, in the transaction that records it.
    const judged = input.judged ?? (current?.status === 'sending' ? current.sendingSince : null);
    const entry = await store.confirmNotificationDelivered(input.key, {
      by: input.by,
      reason: input.reason,
      operationId: input.operationId,
      actor: attempt.actor,
      sendingSince: judged,
    });
    // Taken over since (another run of the operation resends it, approved): the server's answer to that settles it.
    if (entry.status === 'sending' && judged !== null && entry.sendingSince !== judged)
      throw stillSending(entry, 'was taken over by another attempt just now', await inFlightFor(entry));
    if (entry.status !== 'sent') {
      // Nothing to retry: only a person's next decision (retry-step, which sends it) moves it on.
      throw new Classified(
        'PERMANENT_BUSINESS',
        'not_executed',
        'no_unknown_handover',
        `${entry.messageId} is ${entry.status}: no hand-over of it is unknown, so there is no delivery to confirm`,
        { provider: { key: input.key, messageId: entry.messageId } },
      );
    }
    return {
      key: input.key,
      messageId: entry.messageId,
      recipient: maskEmails(entry.recipient),
      providerResponse: entry.providerResponse ?? '',
      alreadySent: true,
    };
  };

  return { deliver, confirmDelivered };
}

/** Failures that happen before any SMTP session with the server exists. */
const NO_SESSION = new Set([
  'connection_refused',
  'dns_failed',
  'connect_timeout',
  'client_refused',
  'envelope_invalid',
]);
