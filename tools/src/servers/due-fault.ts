// Which armed fault fires on a request: each matching fault counts the request, and one whose
// turn it is (every `every`-th request it matches, while it has hits left) fires; a second one due
// on the same request waits for the next. The first armed wins.
import { z } from 'zod';

/** How often an armed fault fires: `count` times, on every `every`-th request it matches (1: the next ones). */
export const spacing = {
  count: z.number().int().min(1).max(10_000).default(1),
  every: z.number().int().min(1).max(10_000).default(1),
};

/** A fault as armed: its hits still to come, and none yet. */
export const unfired = (count: number) => ({ remaining: count, hits: 0, seen: 0 });

export interface Spaced {
  remaining: number;
  hits: number;
  /** Fires on every `every`-th request it matches: 1 is each one. */
  every: number;
  /** Requests it matched so far. */
  seen: number;
}

export function takeDue<F extends Spaced>(armed: F[], matches: (f: F) => boolean): F | undefined {
  let fired: F | undefined;
  for (const f of armed) {
    if (f.remaining <= 0 || !matches(f)) continue;
    f.seen += 1;
    if (f.seen % f.every !== 0) continue;
    if (fired) {
      f.seen -= 1;
      continue;
    }
    fired = f;
    f.remaining -= 1;
    f.hits += 1;
  }
  return fired;
}
