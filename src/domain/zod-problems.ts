// A schema's complaints as one line a person reads, the same from every entry point.
import type { z } from 'zod';

/** `path: message; …`, the value itself named `whole` when the complaint is about all of it. */
export const zodProblems = (error: z.ZodError, whole = '(input)') =>
  error.issues.map((i) => `${i.path.join('.') || whole}: ${i.message}`).join('; ');
