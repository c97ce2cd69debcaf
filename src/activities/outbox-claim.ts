// Which attempt may hand an outbox entry to the mail server: the one that moves it from pending to sending, or one
// that takes over a hand-over whose outcome is unknown, once the policy or a person says it is resent.
import type { NodemailerError } from 'nodemailer';
import { maskEmails } from '../reliability/redaction';
import { resendsUnknownEmail, type RecoveryPolicy } from '../reliability/policy';
import type { FailureDetails } from '../reliability/taxonomy';
import type { NotificationReceipt } from '../contract';
import { IntentConflictError, type OrderStore, type OutboxEntry } from '../store';
import { Classified } from './attempt';

/** What a receipt and every failure say of an email (a type, not an interface: failure details take it as a record). */
export type MailFacts = {
  key: string;
  messageId: string;
  /** Masked. */
  recipient: string;
};

/** A person's approval to resend a hand-over whose outcome is unknown. */
export interface ResendApproval {
  resendApprovedAt?: string;
  approvedHandOver?: string;
}

export function createOutboxClaim(deps: { store: OrderStore; policy: RecoveryPolicy; sendDeadlineMs: number }) {
  const { store } = deps;
  // The policy's row for a send whose outcome is unknown: hand to a person, or resend with the same Message-ID.
  // A hand-over younger than one send's deadline may still be running somewhere; an older one ended without telling.
  // Its age is read on the clock that stamped it, the store's: hosts whose clocks differ agree on it.
  const handOverMs = deps.sendDeadlineMs + 1000;
  /** How long the entry's hand-over may still be running (0: it ended, or never began). */
  const inFlightFor = async (entry: OutboxEntry) =>
    entry.sendingSince === null
      ? 0
      : Math.max(0, Date.parse(entry.sendingSince) + handOverMs - (await store.operations.clock()));
  const inFlight = async (entry: OutboxEntry) => (await inFlightFor(entry)) > 0;

  /** The receipt of an earlier send of the email; undefined when this attempt now holds its hand-over. Throws why not. */
  const claimHandOver = async (
    request: Parameters<OrderStore['claimHandOver']>[0],
    approval: ResendApproval,
    ctx: MailFacts,
  ): Promise<NotificationReceipt | undefined> => {
    // pending → sending is the hand-over's lock: of two attempts, only the one that moves the entry may send.
    const { claimed, ours } = await claim(store, request);
    if (!ours) {
      const current = (await store.getNotification(request.key)) ?? claimed;
      if (current.status === 'sent')
        return { ...ctx, providerResponse: current.providerResponse ?? '', alreadySent: true };
      if (current.status === 'sending') {
        const facts = { ...ctx, sendingSince: current.sendingSince };
        // A person's approval covers the hand-over they judged, however young; otherwise only the policy's row resends
        // one whose outcome is unknown, once it has ended.
        const approved = approvedResend(current, approval);
        // Another attempt (another run of the same operation) is handing it over right now: ask again once it is done.
        if (!approved && (await inFlight(current)))
          throw sendInProgress(facts, `another attempt is sending ${ctx.messageId} right now`);
        if (!approved && !resendsUnknownEmail(deps.policy)) throw outcomeUnknown(facts, 'a previous attempt');
        // Resending takes the hand-over over, re-stamped: of two attempts only one resends, and a retry of
        // ours sees a hand-over of its own, which no approval covers, so it never resends again.
        const notBefore =
          approved && !approval.approvedHandOver
            ? new Date(Date.parse(approval.resendApprovedAt!) + 1).toISOString()
            : undefined;
        if (
          !(await store.takeOverNotification(request.key, current.sendingSince!, {
            endedAfterMs: approved ? 0 : handOverMs,
            ...(notBefore && { notBefore }),
          }))
        ) {
          throw sendInProgress(facts, `another attempt took over ${ctx.messageId} just now`);
        }
      }
      if (current.status === 'pending') {
        // Another attempt held the entry and, refused by the server, released it after our claim: a retry sends cleanly.
        throw new Classified(
          'STATE_CONFLICT',
          'not_executed',
          'concurrent_attempt',
          `another attempt was sending ${ctx.messageId} at the same time and the mail server refused it; retry`,
          { provider: ctx },
        );
      }
      // The policy, or a person's approved decision, says a send of unknown outcome is resent, with the same Message-ID so that receivers can deduplicate it.
    }
    return undefined;
  };

  return { claimHandOver, inFlightFor };
}

/**
 * Whether a person's approval covers this hand-over: the one they judged, named by its stamp. An approval
 * from a run begun before stamps were named covers one stamped before it (the workflow's clock against the
 * store's: kept for those runs only).
 */
function approvedResend(current: OutboxEntry, approval: ResendApproval): boolean {
  if (approval.resendApprovedAt === undefined || current.sendingSince === null) return false;
  if (approval.approvedHandOver !== undefined) return current.sendingSince === approval.approvedHandOver;
  return Date.parse(current.sendingSince) < Date.parse(approval.resendApprovedAt);
}

function sendInProgress(facts: FailureDetails['provider'], what: string): Classified {
  return new Classified(
    'STATE_CONFLICT',
    'may_have_executed',
    'send_in_progress',
    `${what}; look again when it is done`,
    { provider: facts },
  );
}

async function claim(
  store: OrderStore,
  entry: Parameters<OrderStore['claimHandOver']>[0],
): Promise<{ claimed: OutboxEntry; ours: boolean }> {
  try {
    return await store.claimHandOver(entry);
  } catch (err) {
    if (err instanceof IntentConflictError) {
      throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'intent_conflict', maskEmails(err.message), {
        provider: { key: entry.key },
      });
    }
    throw err;
  }
}

/** A hand-over whose outcome is unknown, by this attempt (its connection lost) or a previous one. */
export function outcomeUnknown(
  ctx: MailFacts & { sendingSince: string | null },
  who: string,
  cause?: NodemailerError,
): Classified {
  const why = cause ? ` (${cause.code ?? cause.name}: ${cause.message})` : '';
  return new Classified(
    'UNKNOWN_OUTCOME',
    'may_have_executed',
    who === 'this attempt' ? 'connection_lost_after_handover' : 'previous_attempt_unconfirmed',
    `${who} handed the message ${ctx.messageId} for ${ctx.recipient} to the mail server and its outcome is unknown${why}; ` +
      'check the mailbox for that Message-ID before any resend',
    // A connection lost after the hand-over says something about the server; an earlier attempt's open outcome does not.
    {
      provider: { ...ctx, code: cause?.code ?? null, command: cause?.command ?? null },
      cause,
      health: cause !== undefined,
    },
  );
}
