// A send's activity making a later read step's first look once its own effect is recorded (the read step's
// `firstReadIn`): one task fewer. The read is an attempt of its own step, in its own ledger; one that fails (its
// ledger returned) or has too little of the send's time left is the step's own task to make again.
import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { FirstRead, Read } from '../contract';

/** A read step's first look, within the time it is given. */
export type FirstLook = (input: never, startToCloseMs: number) => Promise<object>;

/** Less than this left of the send's attempt, and the read is left to its own task. */
const MIN_READ_MS = 2000;
/** Kept free at the end of the send's attempt: its result must reach Temporal before its start-to-close. */
const MARGIN_MS = 1000;

/** The send, making the read its input asks for (one of `reads`) after it; what it read rides in its result. */
export function withFirstRead<I extends object, R extends object>(
  send: (input: I) => Promise<R>,
  reads: Readonly<Record<string, FirstLook>>,
): (input: I & FirstRead) => Promise<R & { read?: Read }> {
  return async ({ read: asked, ...input }) => {
    const { startToCloseTimeoutMs, attempt } = Context.current().info;
    const endsAt = startToCloseTimeoutMs ? Date.now() + startToCloseTimeoutMs - MARGIN_MS : Infinity;
    const receipt = await send(input as I);
    // The run's budget paid for the send's first attempt and the read; a retried send's requests are not known here.
    const look = asked && attempt === 1 && Object.hasOwn(reads, asked.step) ? reads[asked.step]! : undefined;
    const left = Math.min(asked?.startToCloseMs ?? 0, endsAt - Date.now());
    if (!asked || !look || left < MIN_READ_MS) return receipt;
    try {
      const output = await look(asked.input as never, left);
      return { ...receipt, read: { [asked.step]: { input: asked.input, output } } };
    } catch (err) {
      // Its ledger goes back with the send: the run charges what it sent before the step's own task is scheduled.
      log.info('first read failed; its step runs as its own task', { step: asked.step, error: (err as Error).message });
      return { ...receipt, read: { [asked.step]: { input: asked.input, failed: ledgerOf(err) } } };
    }
  };
}

/** The ledger a failed attempt reported in its failure's details (none when it failed before it could). */
function ledgerOf(err: unknown): unknown[] {
  const details =
    err instanceof ApplicationFailure ? (err.details?.[0] as { ledger?: unknown[] } | undefined) : undefined;
  return Array.isArray(details?.ledger) ? details.ledger : [];
}
