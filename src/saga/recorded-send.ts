// The send protocol (send.ts) for a send with no record of its own: its record is the store's send record under the
// step's key, stamped, settled and proven absent there; and a lost answer is looked up by that key at the provider.
import type { Attempt } from '../activities/attempt';
import type { KeyedSendRecord, OrderStore } from '../store';
import type { Lookup } from './step';
import { type KeyedSend, outsideDedupeWindow, sendOnce } from './send';

/** Where a step's send is recorded: its key, and the operation whose audit trail it writes. */
export interface SendAt {
  key: string;
  operationId: string;
}

/** What the boundary gives: its request and how it reads the answer, with the provider's request id for the record. */
type Parts<R, Raw> = Omit<
  KeyedSend<KeyedSendRecord<R>, R, Raw>,
  'record' | 'reconcileFirst' | 'stamp' | 'recordUnknown' | 'recordAbsent' | 'recordReceipt'
> & { requestId(raw: Raw): string | null };

/** Sends once under `at.key`, on its record in the store; `what` names the send when it is refused for reconciliation. */
export async function sendRecorded<R, Raw>(
  attempt: Attempt,
  sends: OrderStore['sends'],
  at: SendAt,
  what: string,
  parts: Parts<R, Raw>,
) {
  const { key, operationId } = at;
  const { actor } = attempt;
  return sendOnce(attempt, {
    ...parts,
    record: await sends.get<R>(key, operationId),
    reconcileFirst: (r) => outsideDedupeWindow(`the ${what} was first sent at ${r.firstSentAt}`, key),
    stamp: (onWire) => sends.stamp(key, operationId, actor, onWire).then(() => undefined),
    // The record already shows the send open (sent, neither settled nor proven absent): nothing more to write.
    recordUnknown: async () => undefined,
    recordAbsent: (failure, through) => sends.provenAbsent(key, through, actor, failure.reason),
    recordReceipt: (raw, receipt) => sends.settle(key, receipt, actor, { requestId: parts.requestId(raw) }),
  });
}

/** How a recorded send is looked up by its key at the provider. */
export interface KeyLookup<R> {
  /** What carries the key: its receipt (null while it is neither done nor refused) and what was seen; null if nothing. */
  find(): Promise<{ receipt: R | null; note: string } | null>;
  /** How long after a request is off the wire it may still be missing from what `find` sees. */
  landsWithinMs: number;
  /** What a proven absence says. */
  absent: string;
}

/** A lost answer settled by key: the receipt on record, found (and recorded), or, not found, absent once nothing sent can land. */
export async function lookUpRecorded<R>(
  attempt: Attempt,
  store: Pick<OrderStore, 'sends' | 'operations'>,
  at: SendAt,
  lookup: KeyLookup<R>,
): Promise<Lookup<R>> {
  const { sends } = store;
  const unknown = (note: string) => ({ kind: 'unknown' as const, receipt: null, note });
  const record = await sends.get<R>(at.key, at.operationId);
  if (record.receipt) return { kind: 'found', receipt: record.receipt, note: 'its receipt is on record' };
  const began = await store.operations.clock();
  const found = await lookup.find();
  if (found?.receipt) {
    await sends.settle(at.key, found.receipt, attempt.actor, { reconciled: true });
    return { kind: 'found', ...found };
  }
  if (found) return unknown(found.note);
  const settled = record.offTheWireBy === null ? 0 : Date.parse(record.offTheWireBy) + lookup.landsWithinMs;
  if (began < settled)
    return unknown(`not found yet: a request may still land until ${new Date(settled).toISOString()}`);
  const proven = await sends.provenAbsent(at.key, record.requestsSent, attempt.actor, 'not found at the provider');
  return proven ? { kind: 'absent', receipt: null, note: lookup.absent } : unknown('sent again while it was looked up');
}
