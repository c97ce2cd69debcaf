// The wait to pass to condition(fn, ms). The SDK asks patched() itself inside condition(fn, 0), and
// a patched() call after a local activity can land in another workflow task on replay than it did
// live: so a run never waits 0 ms, at least 1 ms (0 or less: no wait left).
export function conditionTimeout(ms: number): number {
  return Math.max(1, ms);
}
