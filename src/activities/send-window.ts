// How long a refund's send can still be on the wire, read on the store's clock: whether a request
// sent now still falls inside its key's dedupe window, and from when a "not found" can be believed.
import type { ProviderWindows } from '../contract';
import type { OperationRecord } from '../store/types';

/**
 * How far past `stamp + STRIPE_TIMEOUT_MS` a send may still end, read on the store's clock. Its
 * deadline is fixed and enforced on the worker's clock (Date.now() and a timer), while its stamp and
 * every later lookup are read on the store's (the database server's, on PostgreSQL). A constant
 * offset between the two cancels out (the deadline is fixed before the stamp); this covers a step
 * or drift of either clock during the send, and a timer that fires late on a busy worker.
 */
export const SEND_CLOCK_MARGIN_MS = 1000;

export function sendWindow(windows: ProviderWindows) {
  /** How long after its stamp a send of this worker's can still be on the wire. */
  const onWireForMs = windows.requestTimeoutMs + SEND_CLOCK_MARGIN_MS;

  /** The latest a send of this worker's stamped at `stampedAt` (the store's clock) can still be on the wire. */
  const offTheWireBy = (stampedAt: number) => stampedAt + onWireForMs;

  /**
   * The latest any recorded send can still be on the wire: each sender's own bound, which may be a
   * longer timeout than this worker's (a rollout); this worker's arithmetic for sends stamped before
   * bounds were recorded. Null if nothing was sent.
   */
  const sendsOffTheWireBy = (op: OperationRecord) =>
    op.lastSentAt === null
      ? null
      : Math.max(offTheWireBy(Date.parse(op.lastSentAt)), op.offTheWireBy === null ? 0 : Date.parse(op.offTheWireBy));

  /** Whether a request sent now would still reach the provider inside the key's dedupe window. */
  const insideWindow = (op: Pick<OperationRecord, 'firstSentAt'>, at: number) =>
    op.firstSentAt === null || offTheWireBy(at) < Date.parse(op.firstSentAt) + windows.dedupeWindowMs;

  return { onWireForMs, sendsOffTheWireBy, insideWindow };
}
