// A provider request's timeout, cut to what is left of the activity attempt: an attempt that makes
// several requests (a list over pages, the gate's retrieve and list) still ends inside its
// start-to-close, so Temporal never starts the next attempt while this one is still talking.
import { Context } from '@temporalio/activity';
import { currentAttemptScope } from './attempt-scope';

/** Left for the attempt's own bookkeeping (the store, the ledger) after the last request. */
const MARGIN_MS = 1000;

/** Measured on this worker's clock, from when the attempt began here: no other host's clock decides. */
export function requestTimeout(maxMs: number): number {
  const { startToCloseTimeoutMs } = Context.current().info;
  const startedAtMs = currentAttemptScope()?.startedAtMs;
  if (!startToCloseTimeoutMs || startedAtMs === undefined) return maxMs;
  const left = startedAtMs + startToCloseTimeoutMs - MARGIN_MS - Date.now();
  return Math.max(1, Math.min(maxMs, left));
}
