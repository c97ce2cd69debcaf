// Messages from outside a run are input like any other: a Signal's handler notes what does not fit in the run's
// state, and no handler's error reaches the SDK, which would freeze the run (docs/reliability.md, "Messages").
import {
  ApplicationFailure,
  log,
  setHandler,
  TemporalFailure,
  type QueryDefinition,
  type SignalDefinition,
} from '@temporalio/workflow';
import type { z } from 'zod';
import { isRefusedPlaintext, isUndecodable } from '../../codec/payload-converter';
import { PLAINTEXT_REFUSED } from '../../codec/plaintext';
import type { IgnoredMessagesView } from '../../contract';
import { zodProblems } from '../../domain/zod-problems';

/** Kept in the run's state: a flood of malformed Signals must not grow it without bound. */
const KEPT = 20;
const INPUT_CHARS = 200;

export class IgnoredMessages {
  /** Live: the run's state holds this object. */
  readonly view: IgnoredMessagesView = { total: 0, latest: [] };

  note(message: string, reason: string, input: unknown): void {
    const { view } = this;
    view.total += 1;
    view.latest.push({ at: new Date().toISOString(), message, reason, input: render(input) });
    if (view.latest.length > KEPT) view.latest.shift();
  }
}

/** Sets a Signal's handler that takes only what `schema` accepts: what is ignored (`handle` says why) or throws is noted. */
export function setSignalHandler<T>(
  signal: SignalDefinition<[T]>,
  schema: z.ZodType<T>,
  handle: (value: T) => string | undefined,
  ignored: IgnoredMessages,
): void {
  setHandler(signal, (raw: unknown) => {
    // Before the schema: an undecodable payload is never taken for an event.
    if (isUndecodable(raw)) {
      if (raw.$plaintext) log.warn(`Signal ${signal.name} ignored: ${raw.$undecodable}`);
      return ignored.note(signal.name, `${raw.$plaintext ? 'refused' : 'undecodable'}: ${raw.$undecodable}`, raw);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) return ignored.note(signal.name, `malformed: ${zodProblems(parsed.error)}`, raw);
    try {
      const why = handle(parsed.data);
      if (why) ignored.note(signal.name, why, raw);
    } catch (err) {
      ignored.note(signal.name, `its handler failed: ${err instanceof Error ? err.message : String(err)}`, raw);
    }
  });
}

/**
 * Throws, for a run's input, an Update's validator or a Query, when a value was sent in plaintext to a worker that
 * refuses it: the caller reads why in the clear (failure-converter.ts), and a run's input fails it before anything ran.
 */
export function refusePlaintext(...values: unknown[]): void {
  const refused = values.find(isRefusedPlaintext);
  if (refused) throw ApplicationFailure.nonRetryable(refused.$undecodable, PLAINTEXT_REFUSED);
}

/** Sets a Query's handler; one asked with an argument sent in plaintext gets the refusal as its answer. */
export function setQueryHandler<R>(query: QueryDefinition<R, []>, answer: () => R): void {
  setHandler(query, (...args: unknown[]) => {
    refusePlaintext(...args);
    return answer();
  });
}

/** Runs an Update's handler: an error its validator did not foresee fails that Update, never the workflow task. */
export function failingTheUpdateOnly<T>(name: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof TemporalFailure) throw err;
    throw ApplicationFailure.nonRetryable(
      `${name} could not be carried out: ${err instanceof Error ? err.message : String(err)}`,
      'UPDATE_HANDLER_FAILED',
    );
  }
}

function render(input: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(input) ?? typeof input;
  } catch {
    text = '(unprintable)';
  }
  return text.length > INPUT_CHARS ? `${text.slice(0, INPUT_CHARS)}…` : text;
}
