// A schema's complaints, or a reader's, as one line a person reads, the same from every entry point.
import type { z } from 'zod';

/** `path: message; …`, the value itself named `whole` when the complaint is about all of it. */
export const zodProblems = (error: z.ZodError, whole = '(input)') =>
  error.issues.map((i) => `${i.path.join('.') || whole}: ${i.message}`).join('; ');

/** Input its schema refuses: the caller's to correct (a command exits 2), never retried. */
export class InvalidInputError extends Error {
  override name = 'InvalidInputError';
}

/** `input` as `schema` reads it, or an error (`invalid <what>: …`) that names every problem. Changes nothing. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  what: string,
  whole: string,
  Invalid: new (message: string) => Error = InvalidInputError,
): z.output<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw new Invalid(`invalid ${what}: ${zodProblems(parsed.error, whole)}`);
  return parsed.data;
}

/** `read()`'s value, or its error with `what` (the file or setting it read) before the message. */
export function reading<T>(what: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new Error(`${what}${(err as Error).message}`, { cause: err });
  }
}
