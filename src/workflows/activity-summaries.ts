// Each activity call's summary, as the Web UI shows it in the run's event history: what it sends or
// reads, to whom, under which key. One line per activity, built from the call's own input (never a
// customer's address: a notice goes "to the customer of order …"). It is user metadata, a payload the
// codec encrypts; replay does not compare it, so changing a text breaks no run in flight.
import type { RefundActivities } from '../activities';
import { messageIdForKey } from '../contract';
import { maskEmails } from '../reliability/redaction';

type Summaries = { [K in keyof RefundActivities]: (input: Parameters<RefundActivities[K]>[0]) => string };

const money = (i: { amount: number; currency: string }) => `${i.amount} ${i.currency}`;
const resend = (i: { resendApprovedAt?: string }) => (i.resendApprovedAt ? 'resend, as a person approved, ' : '');

const SUMMARIES: Summaries = {
  beginOperation: ({ request }) =>
    `load order ${request.orderId} and commit the intent of operation v${request.operationVersion} (${money(request)})`,
  createRefund: (i) => `refund ${money(i)} of ${i.paymentIntentId} at Stripe, idempotency key ${i.idempotencyKey}`,
  applyRefund: (i) => `record refund ${i.refundId} (${i.amount}) on order ${i.orderId}, key ${i.key}`,
  revertRefund: (i) => `take operation ${i.operationId}'s refund off order ${i.orderId}, key ${i.compensationKey}`,
  sendRefundNotice: (i) =>
    `${resend(i)}email the refund notice (${money(i)}, ${i.refundId}) to the customer of order ${i.orderId}, Message-ID ${messageIdForKey(i.key)}`,
  sendRefundCorrection: (i) =>
    `${resend(i)}email the correction (refund ${i.refundId} did not go through) to the customer of order ${i.orderId}, Message-ID ${messageIdForKey(i.key)}`,
  confirmNoticeDelivered: (i) => `record the notice as delivered on ${i.by}'s word (nothing is sent), key ${i.key}`,
  checkCompletion: (i) =>
    `completion gate: read refund ${i.refundId} at Stripe, order ${i.orderId} and the notice ${i.noticeKey} (sends nothing)`,
  reconcileRefund: (i) =>
    `look up operation ${i.operationId}'s refund${i.refundId ? ` ${i.refundId}` : ''} at Stripe (sends nothing), key ${i.idempotencyKey}`,
  examineFollowUp: (i) => `read refund ${i.refundId} of operation ${i.operationId} at Stripe (sends nothing)`,
  standingRecords: (i) => `read what stands of operation ${i.operationId} in the store`,
  handToFollowUp: (i) => `hand provider event ${i.event.id} to operation ${i.operationId}'s follow-up run`,
  recordOutcome: (i) => `audit trail of ${i.operationId}: ${i.event ?? 'run_stopped'} ${i.status}`,
  decisionPolicy: () => 'read who may decide, as the workers are configured now',
  takeQueued: (i) => `take up to ${i.limit} queued refund requests`,
  recordStarts: (i) => `record ${i.records.length} start(s) of occurrence ${i.occurrenceId} in the queue`,
  listAttention: (i) => `list up to ${i.max} runs that need a person`,
  sendDigest: (i) => `email the operators' digest of ${i.total} run(s) that need a person, key ${i.key}`,
  reserveStock: (i) => `reserve cart ${i.cartId}'s items in stock, key ${i.key}`,
  releaseStock: (i) => `put cart ${i.cartId}'s reserved items back in stock, key ${i.key}`,
  chargeCard: (i) => `charge cart ${i.cartId} at Stripe with ${i.paymentMethod}, idempotency key ${i.key}`,
  reconcileCharge: (i) => `look up the charge of cart ${i.cartId} at Stripe by its key (sends nothing), key ${i.key}`,
  refundCharge: (i) =>
    `refund ${money(i)} of ${i.paymentIntentId} at Stripe (cart ${i.cartId}), idempotency key ${i.key}`,
  sendCheckoutReceipt: (i) =>
    `${resend(i)}email the receipt (${money(i)}) to the customer of cart ${i.cartId}, Message-ID ${messageIdForKey(i.key)}`,
  sendCheckoutCorrection: (i) =>
    `${resend(i)}email the correction (cart ${i.cartId} cancelled) to its customer, Message-ID ${messageIdForKey(i.key)}`,
  sweepUnknown: (i) => `ask up to ${i.maxRuns} parked runs whose refund is unknown to reconcile`,
};

// Past this a summary is cut, so that long ids never make a command too large: the server caps one at 400 bytes once
// encoded (limit.userMetadataSummarySize), and the codec's envelope takes up to about 180 (a 64-character key id).
export const SUMMARY_MAX_CHARS = 200;

/** The summary of one call of the activity `name` with `args`; undefined for an activity this table does not know. */
export function activitySummary(name: string, args: unknown[]): string | undefined {
  const summarize = SUMMARIES[name as keyof Summaries] as ((input: unknown) => string) | undefined;
  if (!summarize) return undefined;
  try {
    const text = maskEmails(summarize(args[0]));
    return text.length <= SUMMARY_MAX_CHARS ? text : `${text.slice(0, SUMMARY_MAX_CHARS - 1)}…`;
  } catch {
    // An input of an unexpected shape (a test's, an older caller's) is not worth failing a workflow task for.
    return undefined;
  }
}
