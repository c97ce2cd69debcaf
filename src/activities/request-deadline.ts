// Every provider request's deadline, cut to what is left of its attempt's own start-to-close (as the run's pinned
// policy scheduled it), so Temporal never starts the next attempt while this one still talks; and how long a refund's
// send can still be on the wire on the store's clock (its key's dedupe window, when a "not found" is believed).
import { log } from '@temporalio/activity';
import type { ProviderWindows } from '../contract';
import { AttemptEndedError } from '../store/errors';
import type { OperationRecord } from '../store/types';
import { Classified, type Attempt } from './attempt';

/**
 * How far past its stamp and timeout a send may still end on the store's clock: its deadline is kept on the worker's
 * (fixed before the stamp, so a constant offset cancels out); this covers a clock's step or drift, and a late timer.
 */
export const SEND_CLOCK_MARGIN_MS = 1000;

/** Left for the attempt's own bookkeeping (the store, the ledger) after the last request. */
const MARGIN_MS = 1000;
/** Below this, a request would likely be cut by our own hand: it is not sent at all. */
const MIN_REQUEST_MS = 1000;

/**
 * Kept before an email's attempt ends while 1.0 workers may still run: they judge a hand-over ended at its stamp +
 * their SMTP start-to-close - 4 s, and a send cut 5 s before its attempt ends is off the wire before they do.
 */
export const SMTP_SEND_MARGIN_MS = 5000;

/** Measured on this worker's clock, from when the attempt began here: no other host's clock decides. */
export function requestTimeout(attempt: Attempt, maxMs: number, marginMs = MARGIN_MS): number {
  const { startToCloseMs, startedAtMs } = attempt;
  if (!startToCloseMs) return maxMs;
  // A wider margin never takes more than half the attempt (a policy with a short start-to-close still sends).
  const margin = Math.max(MARGIN_MS, Math.min(marginMs, startToCloseMs / 2));
  const left = startedAtMs + startToCloseMs - margin - Date.now();
  return Math.max(1, Math.min(maxMs, left));
}

/** The deadline of a send about to be stamped, fixed before the stamp; put in the attempt, where transports cut requests. */
export function sendDeadline(attempt: Attempt, maxMs: number, marginMs = MARGIN_MS) {
  const now = Date.now();
  const timeout = requestTimeout(attempt, maxMs, marginMs);
  // By then every request of the send has ended, and none begins after it.
  const sendBy = now + timeout;
  attempt.sendBy = sendBy;
  // Half the timeout at most: the stamp takes its share of the deadline even when the timeout is short.
  const least = Math.min(MIN_REQUEST_MS, maxMs / 2);
  return {
    /** How long after a stamp taken from now on the send can still be on the wire: the bound its stamp records. */
    onWireForMs: timeout + SEND_CLOCK_MARGIN_MS,
    /** This worker's Date.now() by which the send is surely off the wire (sendBy and the clocks' margin). */
    offWireBy: sendBy + SEND_CLOCK_MARGIN_MS,
    /** What is left of the deadline for a request begun now; 0 when too little is (the request must not go out). */
    left() {
      const ms = sendBy - Date.now();
      return ms >= least ? ms : 0;
    },
  };
}

/** Why a send did not go out: too little of its deadline was left (the worker stalled, or the store kept it waiting). */
export function attemptTimeSpent() {
  const message = 'not sent: too little of this attempt is left for the request to finish';
  return new Classified('TRANSIENT_DEPENDENCY', 'not_executed', 'attempt_time_spent', message);
}

/**
 * Awaited by every transport before a request goes on the wire: the attempt's ledger row is then on disk, so one that
 * never finishes is seen; a failed write is only logged. An attempt that has ended sends nothing (AttemptEndedError).
 */
export async function beforeRequest(attempt: Attempt | undefined): Promise<void> {
  try {
    await attempt?.ledger?.begun();
  } catch (err) {
    if (err instanceof AttemptEndedError) throw err;
    log.warn('attempt ledger write failed', { error: (err as Error).message });
  }
}

/** The latest a send of this worker's stamped at `stampedAt` (the store's clock) can still be on the wire. */
const offTheWireBy = (windows: ProviderWindows, stampedAt: number) =>
  stampedAt + windows.requestTimeoutMs + SEND_CLOCK_MARGIN_MS;

/** Whether a request sent at `at` (the store's clock) would still reach the provider inside the key's dedupe window. */
export const insideDedupeWindow = (windows: ProviderWindows, op: Pick<OperationRecord, 'firstSentAt'>, at: number) =>
  op.firstSentAt === null || offTheWireBy(windows, at) < Date.parse(op.firstSentAt) + windows.dedupeWindowMs;

/**
 * The latest any recorded send can still be on the wire: each sender's own bound, which may be a longer timeout than
 * this worker's (a rollout); this worker's arithmetic for sends stamped before bounds were recorded. Null if none was.
 */
export function sendsOffTheWireBy(windows: ProviderWindows, op: OperationRecord): number | null {
  if (op.lastSentAt === null) return null;
  const recorded = op.offTheWireBy === null ? 0 : Date.parse(op.offTheWireBy);
  return Math.max(offTheWireBy(windows, Date.parse(op.lastSentAt)), recorded);
}
