// An email's outbox entry: which attempt may hand it to the mail server (the one that claims it, or one that takes over
// an unknown hand-over the policy or a person resends), and a person's word that one was delivered. A hand-over is
// judged by the bound its sender recorded with its stamp, on the store's clock: never the judge's own deadline.
import type { NodemailerError } from 'nodemailer';
import { maskEmails } from '../reliability/redaction';
import { resendsUnknownEmail, type RecoveryPolicy } from '../reliability/policy';
import type { FailureDetails } from '../reliability/taxonomy';
import type { NotificationReceipt } from '../contract';
import { IntentConflictError, type DeliveryConfirmation, type OrderStore, type OutboxEntry } from '../store';
import { Classified, type Attempt } from './attempt';
import { RECONCILED_FROM_LOG, type MessageLog } from './message-log';
import { SEND_CLOCK_MARGIN_MS } from './request-deadline';

/** The outbox entry an email is handed over as, to the address the store holds (a customer's never travels in history). */
export interface OutboxMail extends ResendApproval {
  key: string;
  operationId: string;
  orderId: string;
  kind: OutboxEntry['kind'];
  to: string;
}

export type MailText = { subject: string; text: string };

/** A person's word that a notice whose hand-over is unknown was delivered (the confirm-delivered decision). */
export type ConfirmDeliveredInput = Pick<DeliveryConfirmation, 'operationId' | 'by' | 'reason'> & {
  key: string;
  /** The stamp of the hand-over the person judged (absent from runs begun before it was sent: the current one). */
  judged?: string;
};

/** What a receipt and every failure say of an email, its recipient masked (a type: failure details take it as a record). */
export type MailFacts = { key: string; messageId: string; recipient: string };
/** An email's facts with the stamp of the hand-over in question (null: none began). */
type HandOverFacts = MailFacts & { sendingSince: string | null };

/** A person's approval to resend a hand-over whose outcome is unknown. */
export interface ResendApproval {
  /** When they approved: a hand-over begun before it is resent once (same Message-ID). */
  resendApprovedAt?: string;
  /** The hand-over they judged (its `sendingSince`, by the store's clock, from the failure they saw): only it is resent. */
  approvedHandOver?: string;
}

export function createOutbox(deps: { store: OrderStore; policy: RecoveryPolicy; messageLog?: MessageLog }) {
  const { store, messageLog } = deps;
  // A hand-over stamped without a bound (by a worker from before bounds were recorded): the longest an smtp attempt
  // under this worker's policy lasts, which bounded that worker's own deadline.
  const unboundedMs = deps.policy.timeouts.smtp.startToCloseMs + SEND_CLOCK_MARGIN_MS;
  /** The latest the entry's hand-over can still be on the wire, read on the store's clock: the bound its sender recorded. */
  const endsAt = ({ sendingSince, sendingUntil }: OutboxEntry) =>
    sendingUntil !== null ? Date.parse(sendingUntil) : Date.parse(sendingSince!) + unboundedMs;
  /** How long the entry's hand-over may still be running (0: it ended, or never began). */
  const inFlightFor = async (entry: OutboxEntry) =>
    entry.sendingSince === null ? 0 : Math.max(0, endsAt(entry) - (await store.operations.clock()));

  /** An earlier send's receipt, or the stamp of the hand-over this attempt now holds (with its bound); else throws why not. */
  const claimHandOver = async (
    attempt: Attempt,
    request: Parameters<OrderStore['claimHandOver']>[0],
    approval: ResendApproval & { operationId: string },
    ctx: MailFacts,
    onWireForMs: number,
  ): Promise<{ receipt: NotificationReceipt } | { stamp: string }> => {
    // pending → sending is the hand-over's lock: of two attempts, only the one that moves the entry may send.
    const { claimed, stamp } = await store.claimHandOver(request, onWireForMs).catch((err: unknown) => {
      if (!(err instanceof IntentConflictError)) throw err;
      const provider = { key: ctx.key };
      const message = maskEmails(err.message);
      throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'intent_conflict', message, { provider });
    });
    if (stamp !== null) return { stamp };
    const current = (await store.getNotification(request.key)) ?? claimed;
    if (current.status === 'sent')
      return { receipt: { ...ctx, providerResponse: current.providerResponse ?? '', alreadySent: true } };
    if (current.status === 'pending') {
      // Another attempt held the entry and, refused by the server, released it after our claim: a retry sends cleanly.
      const message = `another attempt was sending ${ctx.messageId} at the same time and the mail server refused it; retry`;
      throw new Classified('STATE_CONFLICT', 'not_executed', 'concurrent_attempt', message, { provider: ctx });
    }
    const since = current.sendingSince!;
    const facts = { ...ctx, sendingSince: since };
    // A person's approval naming the hand-over they judged ended unknown covers it, however young; an approval naming
    // none, and the policy's row, resend only a hand-over whose sender's bound has passed.
    const approved = approvedResend(current, approval);
    const judgedEnded = approved && approval.approvedHandOver !== undefined;
    // Another attempt (another run of the same operation) is handing it over right now: ask again once it is done.
    const live = judgedEnded ? 0 : await inFlightFor(current);
    if (live > 0) throw sendInProgress(facts, `another attempt is sending ${ctx.messageId} right now`);
    if (!approved && messageLog) {
      // The provider's log settles it: found, it was sent; proven absent, it is sent again with the same Message-ID.
      const found = await askLog(attempt, messageLog, current, ctx, approval.operationId);
      if (found) return found;
    } else if (!approved && !resendsUnknownEmail(deps.policy)) throw outcomeUnknown(facts, 'a previous attempt');
    // Resending takes the hand-over over, re-stamped with its own bound: of two attempts only one resends, and a retry
    // of ours sees its own hand-over, which no approval covers. The same Message-ID lets receivers deduplicate it.
    const notBefore =
      approved && !approval.approvedHandOver
        ? new Date(Date.parse(approval.resendApprovedAt!) + 1).toISOString()
        : undefined;
    const taken = await store.takeOverNotification(request.key, since, {
      endedAfterMs: judgedEnded ? 0 : endsAt(current) - Date.parse(since),
      onWireForMs,
      ...(notBefore && { notBefore }),
    });
    if (taken === null) throw sendInProgress(facts, `another attempt took over ${ctx.messageId} just now`);
    return { stamp: taken };
  };

  /** The log's word on an unknown hand-over: its receipt if found, null once absence is proven, else look again later. */
  const askLog = async (
    attempt: Attempt,
    log: MessageLog,
    current: OutboxEntry,
    ctx: MailFacts,
    operationId: string,
  ): Promise<{ receipt: NotificationReceipt } | null> => {
    const facts = { ...ctx, sendingSince: current.sendingSince };
    // A hand-over stamped without its sender's bound may still be talking: no miss proves it absent.
    if (current.sendingUntil === null) throw outcomeUnknown(facts, 'a previous attempt (stamped without its bound)');
    const askedAt = await store.operations.clock();
    // A log that cannot be read now is asked again; the step's last attempt ends unknown, for a person.
    const logged = await log.find(facts.messageId).catch((err: Error) => {
      throw awaitingLog(facts, LOG_RETRY_MS, err, `the message log could not be read: ${err.message}`);
    });
    if (logged.length > 0) {
      const { id, acceptedAt } = logged[0]!;
      const response = `${RECONCILED_FROM_LOG} the message log has it as ${id}, accepted at ${acceptedAt}`;
      const sent = await store.markNotificationSent(current.key, response, { operationId, actor: attempt.actor });
      return { receipt: { ...ctx, providerResponse: sent.providerResponse ?? response, alreadySent: true } };
    }
    const wait = endsAt(current) + log.consistencyMs - askedAt;
    if (wait > 0) throw awaitingLog(facts, wait);
    return null;
  };

  /** Records a person's word that a hand-over whose outcome is unknown was delivered: the entry becomes sent, naming them. */
  const confirmDelivered = async (attempt: Attempt, input: ConfirmDeliveredInput): Promise<NotificationReceipt> => {
    // The retry comes once that hand-over's bound has passed.
    const stillSending = (entry: OutboxEntry, what: string, retryAfterMs: number) => {
      const provider = { key: input.key, messageId: entry.messageId };
      const message = `${entry.messageId} ${what}; confirm its delivery once that attempt is done`;
      return new Classified('STATE_CONFLICT', 'not_executed', 'send_in_progress', message, { provider, retryAfterMs });
    };
    // A hand-over still in flight may yet be refused and released: only one that ended without telling is unknown.
    const current = await store.getNotification(input.key);
    const live = current?.status === 'sending' ? await inFlightFor(current) : 0;
    if (current && live > 0) throw stillSending(current, 'is being handed over right now', live);
    // A hand-over judged ended stays ended (its bound never moves): the store records the person's word only while
    // its stamp is still the current one, in the transaction that records it.
    const judged = input.judged ?? (current?.status === 'sending' ? current.sendingSince : null);
    const { by, reason, operationId } = input;
    const confirmation = { by, reason, operationId, actor: attempt.actor, sendingSince: judged };
    const entry = await store.confirmNotificationDelivered(input.key, confirmation);
    // Taken over since (another run of the operation resends it, approved): the server's answer to that settles it.
    if (entry.status === 'sending' && judged !== null && entry.sendingSince !== judged)
      throw stillSending(entry, 'was taken over by another attempt just now', await inFlightFor(entry));
    if (entry.status !== 'sent') {
      // Nothing to retry: only a person's next decision (retry-step, which sends it) moves it on.
      const message = `${entry.messageId} is ${entry.status}: no hand-over of it is unknown, so there is no delivery to confirm`;
      const provider = { key: input.key, messageId: entry.messageId };
      throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'no_unknown_handover', message, { provider });
    }
    const mail = { key: input.key, messageId: entry.messageId, recipient: maskEmails(entry.recipient) };
    return { ...mail, providerResponse: entry.providerResponse ?? '', alreadySent: true };
  };

  return { claimHandOver, confirmDelivered };
}

/** A hand-over whose outcome the message log will settle once it may show the message: the retry asks it then. */
export function awaitingLog(facts: HandOverFacts, retryAfterMs: number, cause?: Error, note?: string) {
  return new Classified(
    'STATE_CONFLICT',
    'may_have_executed',
    'awaiting_message_log',
    `the outcome of handing ${facts.messageId} to the mail server is unknown; ` +
      (note ?? `the message log may show it in ${retryAfterMs} ms`),
    // A lost answer is a health failure of the relay; a log that cannot be read says nothing of it.
    { provider: facts, retryAfterMs, ...(cause && { cause, health: note === undefined }) },
  );
}

/** How soon a log that could not be read is asked again. */
const LOG_RETRY_MS = 2000;

/**
 * Whether a person's approval covers this hand-over: the one they judged, named by its stamp. One from a run begun
 * before stamps were named covers one stamped before it (the workflow's clock against the store's: those runs only).
 */
function approvedResend(current: OutboxEntry, approval: ResendApproval): boolean {
  if (approval.resendApprovedAt === undefined || current.sendingSince === null) return false;
  if (approval.approvedHandOver !== undefined) return current.sendingSince === approval.approvedHandOver;
  return Date.parse(current.sendingSince) < Date.parse(approval.resendApprovedAt);
}

function sendInProgress(facts: FailureDetails['provider'], what: string): Classified {
  const message = `${what}; look again when it is done`;
  return new Classified('STATE_CONFLICT', 'may_have_executed', 'send_in_progress', message, { provider: facts });
}

/** A hand-over whose outcome is unknown, by this attempt (its connection lost) or a previous one. */
export function outcomeUnknown(ctx: HandOverFacts, who: string, cause?: NodemailerError): Classified {
  const why = cause ? ` (${cause.code ?? cause.name}: ${cause.message})` : '';
  return new Classified(
    'UNKNOWN_OUTCOME',
    'may_have_executed',
    who === 'this attempt' ? 'connection_lost_after_handover' : 'previous_attempt_unconfirmed',
    `${who} handed the message ${ctx.messageId} for ${ctx.recipient} to the mail server and its outcome is unknown${why}; ` +
      'check the mailbox for that Message-ID before any resend',
    // A connection lost after the hand-over says something about the server; an earlier attempt's open outcome does not.
    { provider: { ...ctx, code: cause?.code ?? null, command: cause?.command ?? null }, cause, health: !!cause },
  );
}
