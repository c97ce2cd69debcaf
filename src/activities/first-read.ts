// A send's activity making a later read step's first look once its own effect is recorded (the read step's
// `firstReadIn`): one task fewer. The look is attempt 1 of its own step, in its own ledger, its row begun in the
// send's recording transaction (on disk before the look's first request, no commit of its own). One that fails, or has
// too little of the send's time left, is the step's own task to make again; its ledger goes back to be charged.
import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { FirstRead, Read } from '../contract';
import type { AttemptEnd, OperationLog } from '../store';
import { ledgerOf, openAttempt, type StepCall, type Within } from './attempt';

/** A read step's first look: the call its attempts are kept under, and one look within the time and row it is given. */
export interface FirstLook<In> {
  call(input: In): StepCall;
  look(input: In, within: Within): Promise<object>;
}

/** Less than this left of the send's attempt, and the read is left to its own task. */
const MIN_READ_MS = 2000;
/** Kept free at the end of the send's attempt: its result must reach Temporal before its start-to-close. */
const MARGIN_MS = 1000;

/** The end of a look whose row was begun and which was not made: nothing was sent. */
const NOT_MADE: AttemptEnd = {
  transportRequests: 0,
  outcome: 'CAPACITY',
  certainty: 'not_executed',
  reason: 'first_look_not_made',
  retryAfterMs: null,
  nextDelayMs: null,
  providerRequestId: null,
};

/** The send, making the read its input asks for (one of `reads`) after it; what it read rides in its result. */
export function withFirstRead<I extends object, R extends object>(
  send: (input: I) => Promise<R>,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  reads: Readonly<Record<string, FirstLook<any>>>,
  ledgers: OperationLog,
): (input: I & FirstRead) => Promise<R & { read?: Read }> {
  return async ({ read: asked, ...input }) => {
    const { startToCloseTimeoutMs, attempt, workflowExecution } = Context.current().info;
    const endsAt = startToCloseTimeoutMs ? Date.now() + startToCloseTimeoutMs - MARGIN_MS : Infinity;
    const read = asked && Object.hasOwn(reads, asked.step) ? reads[asked.step]! : undefined;
    if (!asked || !read) return send(input as I);
    const call = read.call(asked.input);
    /**
     * A look asked for and not returned: the step's ledger in this run goes back instead (what a look sent, an earlier
     * attempt's among it, is charged before the step's own task is scheduled); nothing when it has no row.
     */
    const notReturned = async (receipt: R, rows?: unknown[]) => {
      const ledger = rows?.length
        ? rows
        : await ledgerOf(ledgers, call.key, workflowExecution?.runId ?? '').catch(() => []);
      return ledger.length ? { ...receipt, read: { [asked.step]: { failed: ledger } } } : receipt;
    };
    // A retried send makes no look: the run paid for the send's first attempt and the look, not for more.
    if (attempt > 1) return notReturned(await send(input as I));
    const ledger = openAttempt(ledgers, call, 1);
    const notMade = async () => {
      // Begun in the send's transaction: a row left open would say the look may have been made. None: nothing to say.
      if (ledger.mayBeWritten) await ledger.finish(NOT_MADE).catch(() => undefined);
    };
    const receipt = await ledger
      .alongside(() => send(input as I))
      .catch(async (err: unknown) => {
        await notMade();
        throw err;
      });
    const left = Math.min(asked.startToCloseMs, endsAt - Date.now());
    if (left < MIN_READ_MS) {
      await notMade();
      return notReturned(receipt);
    }
    try {
      const output = await read.look(asked.input, { attempt: 1, startToCloseMs: left, ledger });
      return { ...receipt, read: { [asked.step]: { output } } };
    } catch (err) {
      log.info('first read failed; its step runs as its own task', { step: asked.step, error: (err as Error).message });
      return notReturned(receipt, reported(err));
    }
  };
}

/** The ledger a failed attempt reported in its failure's details (none when it could not be read back). */
function reported(err: unknown): unknown[] {
  const details =
    err instanceof ApplicationFailure ? (err.details?.[0] as { ledger?: unknown[] } | undefined) : undefined;
  return Array.isArray(details?.ledger) ? details.ledger : [];
}
