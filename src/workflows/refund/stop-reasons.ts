// Why a refund run stopped, parked or ended, in the words its outcome, its audit trail and an
// operator read. Pure: each reason is built here from the facts, never written at the call site.
import type { RefundStep } from '../../compensations/registry';
import type { GateResult, RefundReceipt, StepError } from '../../contract';
import { retryCreateText } from '../../reliability/verdict';

type Money = Pick<RefundReceipt, 'amount' | 'currency'>;
/** A refund as the provider last showed it. */
type Seen = Pick<RefundReceipt, 'refundId' | 'status'>;
const retryCreate = retryCreateText();

/** A step that failed for good, as the policy decided it; `attempts` when its retries ran out. */
export function stepFailed(step: RefundStep, error: StepError, attempts: number | null) {
  const what = `${step} failed with ${error.code} (${error.reason}): ${error.message}`;
  const exhausted = attempts !== null ? ` Retries ran out (${attempts} attempts).` : '';
  return {
    refundStands: (refundId: string | undefined) =>
      `${what}.${exhausted} Refund ${refundId} stands and is never sent again; a person must finish ${step}`,
    effectUnknown: (operationId: string) =>
      `${what}. Whether it took effect is unknown: reconcile operation ${operationId} with the provider before any new attempt`,
    earlierSendOpen: (why: string, operationId: string) =>
      `${what}.${exhausted} This attempt had no effect, but ${why}. Reconcile operation ${operationId} with the provider before any new attempt`,
    refused: () => `${what}. Nothing was refunded`,
    nothingRefunded: () => `${what}.${exhausted} Nothing was refunded; a person decides what happens next`,
  };
}

export const providerSaysFailed = (e: { type: string; id: string; refundId: string; refundStatus: string }) =>
  `${e.type} ${e.id} says refund ${e.refundId} is ${e.refundStatus}: the provider is asked, and what it confirms is compensated`;

/** Cancelled by an operator: what it was doing, what the refund is, and whether anything is left. */
export function cancelledWhile(
  was: string,
  effect: string,
  compensated: boolean,
  settled: boolean,
  leftBecause?: string,
): string {
  const done = compensated ? ', its finished steps compensated' : '';
  if (settled) return `cancelled while ${was}; the refund is ${effect}${done}: nothing is left to do`;
  return `cancelled while ${was}; the refund is ${effect}${done}: a person finishes what was started${leftBecause ? ` (${leftBecause})` : ''}`;
}

export const earlierUnknown = (operationId: string, orderId: string, note: string) =>
  `earlier operation ${operationId} on order ${orderId} has an unknown outcome (${note}); this operation waits until it is reconciled, so that nothing is refunded on top of it`;

export const earlierRefunded = (operationId: string, refund: RefundReceipt, recorded: string) =>
  `earlier operation ${operationId} turned out to have refunded ${refund.amount} ${refund.currency} (${refund.refundId}); ${recorded}. ` +
  'This operation was asked for while that refund looked lost or pending, so nothing was sent for it: if it is still wanted, start it again and it is checked against what is left to refund';

/** `next`: what a person is told follows (the run's first send says a person decides; a parked run's look says nothing more). */
export const providerFailed = (refundId: string, note: string, next = '') =>
  `the provider failed refund ${refundId}: ${note}. Nothing was refunded and the customer was not emailed${next}`;

export const resubmissionsSpent = (max: number, note: string) =>
  `the refund's outcome stayed unknown through ${max} resubmissions (${note}); nothing more is sent`;

export const refundUnknown = (note: string, operationId: string) =>
  `the refund's outcome is unknown: ${note}. Nothing more is sent and nothing is claimed: reconcile operation ${operationId} with the provider before any new attempt`;

export const stillAbsent = (note: string) =>
  `reconciled again: ${note}. Nothing was sent; a person decides whether to send it (${retryCreate}) or abandon`;

export const stillUnsettled = (note: string) =>
  `reconciled again, and the refund is still not settled: ${note}. Nothing was sent; a person decides (${retryCreate})`;

export const receiptFailed = (refund: RefundReceipt) =>
  `the provider's refund ${refund.refundId} for this operation is ${refund.status}: nothing was refunded, the order and the customer are left as they are; a person decides what happens next`;

export const partialOf = (refund: RefundReceipt, asked: Money) =>
  `refund ${refund.refundId} is ${refund.amount} ${refund.currency} of the ${asked.amount} ${asked.currency} asked`;

export const moreThanAsked = (refund: RefundReceipt, asked: Money) =>
  `refund ${refund.refundId} is ${refund.amount} ${refund.currency}, more than the ${asked.amount} asked; it stands, and a person reconciles the difference`;

export const partialRefund = (note: string, refund: RefundReceipt) =>
  `partial refund: ${note}. The order was updated to what was really refunded (${refund.amount} ${refund.currency}); the customer was not emailed. ` +
  'A person decides: refund the rest under a new operation version, or tell the customer';

/** Why a gate's disagreements park the run; one whose own refund failed beside another carrying the operation id names both. */
export function gateMismatch(gate: GateResult): string {
  const failed = gate.findings.filter((f) => !f.ok).map((f) => `${f.check}: ${f.observed}`);
  const own = gate.refund;
  const others = gate.otherRefundIds ?? [];
  const ownFailed = own.status === 'failed' || own.status === 'canceled';
  const stands =
    ownFailed && others.length > 0
      ? `This run's refund ${own.refundId} is ${own.status}, and ${others.join(', ')} carr${others.length === 1 ? 'ies' : 'y'} the operation id too and may stand: nothing is undone and no refund is sent again`
      : 'The refund stands and is never sent again';
  return `the completion gate found disagreements: ${failed.join('; ')}. ${stands}; a person must reconcile them`;
}

export const awaitingWebhook = (refund: Seen, until: string, waitMs: number) =>
  `refund ${refund.refundId} is ${refund.status} at the provider: awaiting its webhook until ${until}; next poll in ${Math.round(waitMs / 1000)} s`;

export const providerDeadline = (refund: Seen, since: string, until: string, polls: number) =>
  `refund ${refund.refundId} is still ${refund.status} at the provider ${since} → ${until} (the policy's awaitProvider deadline), ` +
  `after ${polls} polls and no webhook that settled it; it stands, and a person follows it up`;

/** What a compensation undoes, and why. */
export const undoneBecause = (refund: RefundReceipt | undefined) =>
  refund
    ? `the provider failed refund ${refund.refundId} after accepting it (${refund.status})`
    : 'the refund did not go through';

export const storeUnreadable = (what: string, message: string) =>
  `${what}. What stands could not be read from the store (${message}), so nothing was undone; a person compensates it`;

export const compensated = (what: string) =>
  `${what}. The finished steps were compensated in reverse order, each under its own key`;

/** Compensations left open (`unknown`: quarantined ones), and a held notice's reason. */
export function compensationsOpen(what: string, unknown: string[], failed: boolean, held: string | null): string {
  const open = unknown.length
    ? ` The outcome of ${unknown.join(', ')}'s compensation is unknown: it is quarantined, never retried blind; a person checks it (the step table has its key and Message-ID).`
    : failed
      ? ' A compensation failed: see the step table; a person must finish it.'
      : '';
  return `${what}.${open}${held ? ` ${held}` : ''}`;
}
