// Which armed fault fires on a request: each matching fault counts the request, and one whose
// turn it is (every `every`-th request it matches, while it has hits left) fires; a second one due
// on the same request waits for the next. The first armed wins.
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
