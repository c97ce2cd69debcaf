// What the world says about one refund operation, read where its effects land: the store, Stripe (and the local
// server's ledger) and the mailbox. Every fact names the id it comes from; a source that cannot be read is said so.
import type Stripe from 'stripe';
import { compensationKey, messageIdForKey, stepKey } from '../contract';
import { maskEmails } from '../reliability/redaction';
import type { OrderStore, OutboxEntry } from '../store';

export interface Fact {
  /** Where it comes from, by id: `stripe:re_…`, `store:operation:…`, `mailbox:<…@…>`. */
  id: string;
  says: string;
}

export type Evidence = Awaited<ReturnType<typeof gatherEvidence>>;

export interface EvidenceSources {
  store: OrderStore;
  stripe: Stripe;
  /** The local Stripe server, whose ledger counts effects; undefined for real Stripe. */
  ledgerUrl?: string;
  /** The local mailbox's API; undefined when mail goes elsewhere. */
  mailboxUrl?: string;
}

export const short = (e: unknown) => (e instanceof Error ? e.message : String(e));

export async function gatherEvidence(sources: EvidenceSources, operationId: string, orderId: string) {
  const { store } = sources;
  const noticeKey = stepKey(operationId, 'notify_customer');
  const correctionKey = compensationKey(noticeKey);
  const [operation, order, applied, notice, correction, audit, events] = await Promise.all([
    store.operations.get(operationId),
    store.getOrder(orderId),
    store.appliedRefund(operationId),
    store.getNotification(noticeKey),
    store.getNotification(correctionKey),
    store.operations.auditTrail(operationId),
    store.providerEvents.forOperation(operationId),
  ]);
  const ev = {
    operationId,
    operation: operation ?? null,
    order: order ?? null,
    applied: applied ?? null,
    notice: notice ?? null,
    correction: correction ?? null,
    audit,
    /** Provider events (webhooks) the receiver took for this operation. */
    events,
    /** The last follow-up run of this operation, as the audit trail records it. */
    followUp: null as { workflowId: string; status: string; reason: string } | null,
    /** The provider's refunds carrying this operation id; null when the provider could not be asked. */
    refunds: null as Stripe.Refund[] | null,
    /** Refunds the local Stripe server's ledger made under this operation's key; null without a local ledger. */
    ledgerRefunds: null as number | null,
    /** Messages in the mailbox by Message-ID; null when the mailbox could not be read. */
    mailbox: null as { notice: number; correction: number } | null,
    noticeMessageId: notice?.messageId ?? messageIdForKey(noticeKey),
    correctionMessageId: correction?.messageId ?? messageIdForKey(correctionKey),
    facts: [] as Fact[],
    /** Sources that could not be read, and why. */
    unavailable: [] as string[],
  };
  storeFacts(ev, orderId);

  const pi = order?.paymentIntentId;
  if (!pi) ev.unavailable.push(`stripe: order ${orderId} is not in the store, so its payment intent is not known`);
  else await providerFacts(ev, sources, pi, stepKey(operationId, 'create_refund'));
  if (sources.mailboxUrl) await mailboxFacts(ev, sources.mailboxUrl);
  else
    ev.unavailable.push(
      `mailbox: mail goes to a server whose mailbox cannot be read from here; look for ${ev.noticeMessageId} there`,
    );
  return ev;
}

function storeFacts(ev: Evidence, orderId: string): void {
  const { operation: op, order, applied, notice, correction } = ev;
  const id = `store:operation:${ev.operationId}`;
  if (!op)
    ev.facts.push({ id, says: 'no operation record: no run of this operation got as far as recording its intent' });
  else {
    const absence =
      op.provenAbsentThrough === null ? 'no absence proof' : `absence proven through send ${op.provenAbsentThrough}`;
    const refund = op.refund
      ? `; refund ${op.refund.refundId} (${op.refund.amount} ${op.refund.currency}, ${op.refund.status})`
      : '';
    ev.facts.push({ id, says: `status ${op.status}; ${op.requestsSent} create request(s) sent; ${absence}${refund}` });
  }
  ev.facts.push({
    id: `store:order:${orderId}`,
    says: order
      ? `${order.status}; ${order.refundedAmount} of ${order.amount} ${order.currency} refunded (version ${order.version})`
      : 'no such order',
  });
  if (applied) {
    const reverted = applied.revertedByKey ? `, taken off again by ${applied.revertedByKey}` : '';
    ev.facts.push({
      id: `store:applied:${ev.operationId}`,
      says: `the order recorded refund ${applied.refundId} of ${applied.amount} for this operation${reverted}`,
    });
  }
  for (const entry of [notice, correction]) if (entry) ev.facts.push(outboxFact(entry));
  for (const e of ev.events) {
    const handed = e.outcome?.startsWith('signalled')
      ? `handed to ${e.handedTo} at ${e.handedAt}`
      : (e.outcome ?? 'not handed on yet');
    ev.facts.push({
      id: `event:${e.eventId}`,
      says: `${e.type}: refund ${e.refundId} ${e.refundStatus}, sent ${new Date(e.created * 1000).toISOString()}, received ${e.receivedAt} (${e.deliveries} deliver${e.deliveries === 1 ? 'y' : 'ies'}); ${handed}`,
    });
  }
  // A refund that failed after its run finished is followed up by another run, tied to the same operation.
  for (const a of ev.audit.filter((e) => e.event === 'follow_up')) {
    const d = a.detail as { followUp?: string; runId?: string; status?: string; reason?: string };
    ev.followUp = { workflowId: d.followUp ?? a.actor, status: String(d.status), reason: d.reason ?? '' };
    ev.facts.push({
      id: `temporal:${d.followUp ?? a.actor}`,
      says: `follow-up run ${d.runId ?? ''} of this operation: ${d.status ?? '?'} at ${a.at}: ${d.reason ?? ''}`,
    });
  }
  for (const a of ev.audit.filter((e) => e.event === 'decision')) {
    const d = a.detail as Record<string, string | null | undefined>;
    ev.facts.push({
      id: `store:audit:${a.seq}`,
      says:
        `decision ${d.decision ?? '?'} by ${d.by ?? a.actor}${d.keyId ? ` (signed ${d.keyId})` : ''}` +
        `${d.approvedBy ? `, approved by ${d.approvedBy}${d.approvedByKeyId ? ` (signed ${d.approvedByKeyId})` : ''}` : ''} at ${a.at}`,
    });
  }
}

async function providerFacts(ev: Evidence, sources: EvidenceSources, pi: string, createKey: string): Promise<void> {
  try {
    const all: Stripe.Refund[] = [];
    for await (const r of sources.stripe.refunds.list({ payment_intent: pi, limit: 100 })) all.push(r);
    const mine = (ev.refunds = all.filter((r) => r.metadata?.operation_id === ev.operationId));
    for (const r of mine) {
      const created = new Date(r.created * 1000).toISOString();
      ev.facts.push({
        id: `stripe:${r.id}`,
        says: `refund of ${r.amount} ${r.currency}, ${r.status}, created ${created}, metadata.operation_id ${ev.operationId}`,
      });
    }
    if (mine.length === 0)
      ev.facts.push({
        id: `stripe:${pi}`,
        says: `none of the payment intent's ${all.length} refund(s) carries metadata.operation_id ${ev.operationId}`,
      });
  } catch (err) {
    ev.unavailable.push(`stripe: listing the refunds of ${pi} failed: ${short(err)}`);
  }
  if (!sources.ledgerUrl) return;
  try {
    const res = await fetch(`${sources.ledgerUrl}/_ledger?payment_intent=${encodeURIComponent(pi)}`);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const { effects } = (await res.json()) as {
      effects: { type: string; idempotencyKey: string | null; requestsWithKey: number }[];
    };
    const made = effects.filter((e) => e.type === 'refund.created' && e.idempotencyKey === createKey);
    ev.ledgerRefunds = made.length;
    const requests = made.reduce((n, e) => n + e.requestsWithKey, 0);
    ev.facts.push({
      id: `ledger:${createKey}`,
      says: `the Stripe server's ledger has ${made.length} refund(s) made under this key${made.length ? `, from ${requests} request(s) carrying it` : ''}`,
    });
  } catch (err) {
    ev.unavailable.push(`ledger: reading the Stripe server's ledger failed: ${short(err)}`);
  }
}

/** An outbox entry: its kind, Message-ID, masked recipient, how far its hand-over got. */
export function outboxFact(entry: OutboxEntry): Fact {
  const sent =
    entry.status === 'sent'
      ? `accepted by the mail server at ${entry.sentAt} (${entry.providerResponse})`
      : entry.status;
  return {
    id: `store:outbox:${entry.key}`,
    says: `${entry.kind} ${entry.messageId} to ${maskEmails(entry.recipient)}: ${sent}; ${entry.attempts} hand-over attempt(s)`,
  };
}

/** Adds what the mailbox holds under `messageId` to `facts`, and returns how many; throws when it cannot be read. */
export async function countMessages(facts: Fact[], mailboxUrl: string, messageId: string): Promise<number> {
  const res = await fetch(`${mailboxUrl}/messages?message_id=${encodeURIComponent(messageId)}`);
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const { messages } = (await res.json()) as { messages: { to: string[]; receivedAt: string }[] };
  const when = messages.map((m) => m.receivedAt).join(', ');
  facts.push({
    id: `mailbox:${messageId}`,
    says: messages.length ? `${messages.length} message(s) received (${when})` : 'no message with this Message-ID',
  });
  return messages.length;
}

async function mailboxFacts(ev: Evidence, mailboxUrl: string): Promise<void> {
  const count = (messageId: string) => countMessages(ev.facts, mailboxUrl, messageId);
  try {
    // A correction is looked for only once one was meant to go out.
    ev.mailbox = {
      notice: await count(ev.noticeMessageId),
      correction: ev.correction ? await count(ev.correctionMessageId) : 0,
    };
  } catch (err) {
    ev.unavailable.push(`mailbox: reading ${mailboxUrl} failed: ${short(err)}; look for ${ev.noticeMessageId} by hand`);
  }
}
