// The send protocol, activity side: one request to a provider under a step's key. A receipt on record is replayed;
// outside the key's dedupe window, an earlier send whose outcome is open is reconciled first, never resent blind;
// the send's deadline is fixed before its stamp, which records by when it is off the wire; and what the request
// proves (a receipt, an unknown outcome, or that nothing was made) goes to the record. Each boundary gives its record
// and its request; the order of things is decided here, once.
import { Classified, recordingEffect, type Attempt } from '../activities/attempt';
import { attemptTimeSpent, sendDeadline } from '../activities/request-deadline';

/** What a send's record says of the sends under its key. */
export interface SendRecord<R> {
  receipt: R | null;
  requestsSent: number;
  /** The count of sends proven to have made nothing (reconciliation, or a refusal that proves it). */
  provenAbsentThrough: number | null;
  lastSentAt: string | null;
}

/** Whether the key's dedupe window decides: an earlier send whose outcome nothing on record settles. */
const earlierSendOpen = <R>(record: SendRecord<R>) =>
  !record.receipt && record.lastSentAt !== null && record.provenAbsentThrough !== record.requestsSent;

/** Whether a send may go out now, from its record alone: not while an earlier one is open outside the dedupe window. */
export function sendDecision<R>(record: SendRecord<R>, insideWindow: boolean) {
  if (record.receipt) return { kind: 'replay' as const, receipt: record.receipt };
  if (earlierSendOpen(record) && !insideWindow) return { kind: 'reconcile_first' as const };
  return { kind: 'send' as const };
}

/** One boundary's part of a send: its record, its request, and how it reads what came back. */
export interface KeyedSend<Rec extends SendRecord<R>, R, Raw> {
  record: Rec;
  /** Whether a request sent now reaches the provider inside its key's dedupe window. */
  insideWindow(record: Rec): Promise<boolean>;
  replayed(receipt: R): R;
  /** Why nothing is sent: an earlier send is open outside the dedupe window. */
  reconcileFirst(record: Rec): Classified;
  /** The longest one request may take; what is left of the attempt cuts it shorter. */
  maxRequestMs: number;
  /** Stamps the send, recording that it can be on the wire for `onWireForMs` from its stamp. */
  stamp(onWireForMs: number): Promise<void>;
  request(timeoutMs: number): Promise<Raw>;
  classify(err: unknown): Classified;
  /** Whether a failure proves the request made nothing (it never left, or the provider itself refused it). */
  provesNothingSent(failure: Classified): boolean;
  /** Records an open outcome (best effort: the failure itself tells the workflow). */
  recordUnknown(failure: Classified): Promise<unknown>;
  /** Records that this send, the `ifRequestsSent`th, made nothing, as every earlier one (best effort). */
  recordAbsent(failure: Classified, ifRequestsSent: number): Promise<unknown>;
  receiptOf(raw: Raw): R;
  recordReceipt(raw: Raw, receipt: R): Promise<unknown>;
  /** The failure when the effect exists and only its record could not be written. */
  notRecorded(raw: Raw, err: unknown): Classified;
}

/** Why nothing is sent: an earlier send under `key` is open, and one now would fall outside its dedupe window. */
export const outsideDedupeWindow = (what: string, key: string) =>
  new Classified(
    'UNKNOWN_OUTCOME',
    'may_have_executed',
    'outside_dedupe_window',
    `not sent: ${what}, outside the provider's dedupe window for key ${key}; reconcile with the provider before any new request`,
  );

/** Acts on the send's decision within `attempt`, whose deadline cuts the request and whose ledger the receipt ends. */
export async function sendOnce<Rec extends SendRecord<R>, R, Raw>(
  attempt: Attempt,
  send: KeyedSend<Rec, R, Raw>,
): Promise<R> {
  const { record } = send;
  // The window is asked (the store's clock read) only when it decides.
  const decision = sendDecision(record, earlierSendOpen(record) ? await send.insideWindow(record) : true);
  if (decision.kind === 'replay') return send.replayed(decision.receipt);
  if (decision.kind === 'reconcile_first') throw send.reconcileFirst(record);
  // Fixed before its stamp: nothing of the send is on the wire after stamp + what the stamp records.
  const deadline = sendDeadline(attempt, send.maxRequestMs);
  if (!deadline.left()) throw attemptTimeSpent();
  await send.stamp(deadline.onWireForMs);
  let raw: Raw;
  try {
    // The stamp may have waited for the database: what is left of the deadline is the request's, or it does not go out.
    const timeout = deadline.left();
    if (!timeout) throw attemptTimeSpent();
    raw = await send.request(timeout);
  } catch (err) {
    const failure = send.classify(err);
    if (failure.certainty !== 'not_executed') await send.recordUnknown(failure).catch(() => undefined);
    else if (send.provesNothingSent(failure) && (record.provenAbsentThrough ?? 0) === record.requestsSent)
      // Counted in sends, unless another send went out meanwhile.
      await send.recordAbsent(failure, record.requestsSent + 1).catch(() => undefined);
    throw failure;
  }
  const receipt = send.receiptOf(raw);
  try {
    await recordingEffect(attempt, () => send.recordReceipt(raw, receipt));
  } catch (err) {
    throw send.notRecorded(raw, err);
  }
  return receipt;
}
