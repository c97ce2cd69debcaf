// A provider request's timeout, cut to what is left of the activity attempt: an attempt that makes
// several requests (a list over pages, the gate's retrieve and list) still ends inside its
// start-to-close, so Temporal never starts the next attempt while this one is still talking.
import { Context } from '@temporalio/activity';

/** Left for the attempt's own bookkeeping (the store, the ledger) after the last request. */
const MARGIN_MS = 1000;

export function requestTimeout(maxMs: number): number {
  const info = Context.current().info;
  if (!info.startToCloseTimeoutMs) return maxMs;
  const left = info.currentAttemptScheduledTimestampMs + info.startToCloseTimeoutMs - MARGIN_MS - Date.now();
  return Math.max(1, Math.min(maxMs, left));
}
