// Facts `inspect` reads alike for any saga's run: a send's record in the store, the emails sent under the run's keys
// (the outbox, the mailbox), and its operation's audit trail. A source that cannot be read is said so, never filled in.
import type { Evidence, EvidenceSources, Fact } from './facts';
import { countMessages, outboxFact, short } from './facts';
import type { KeyedSendRecord } from '../store';

export type Gathered = Pick<Evidence, 'facts' | 'unavailable'>;

/** Reads one source into `into`; one that fails is named among the unavailable. */
export const readSource = (into: Gathered, source: string, read: () => Promise<unknown>) =>
  read().catch((err: unknown) => into.unavailable.push(`${source}: ${short(err)}`));

/** What a send's record says; `what` names its requests. */
export function sendFact(send: KeyedSendRecord, what: string): Fact {
  const receipt = send.receipt ? `receipt ${JSON.stringify(send.receipt)}` : 'no receipt';
  const absent = send.provenAbsentThrough ?? 'none';
  return {
    id: `store:send:${send.key}`,
    says: `${send.requestsSent} ${what} request(s) sent; absence proven through ${absent}; ${receipt}`,
  };
}

/** The emails under `keys` as the outbox and the mailbox hold them, then the operation's audit trail. */
export async function mailAndAuditFacts(sources: EvidenceSources, keys: string[], operationId: string, into: Gathered) {
  const { store, mailboxUrl } = sources;
  for (const key of keys) {
    const entry = await store.getNotification(key);
    if (!entry) continue;
    into.facts.push(outboxFact(entry));
    if (mailboxUrl) await readSource(into, 'mailbox', () => countMessages(into.facts, mailboxUrl, entry.messageId));
  }
  for (const a of await store.operations.auditTrail(operationId))
    into.facts.push({ id: `store:audit:${a.seq}`, says: `${a.at} ${a.actor}: ${a.event} ${JSON.stringify(a.detail)}` });
}
