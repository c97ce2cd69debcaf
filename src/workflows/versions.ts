// Which code a refund run follows, decided once, in its first workflow task. A run that starts with
// this code records one patch marker (LOCAL_STEPS_EPOCH) and from then on takes every branch the
// patches before it guard without asking patched() again; a run that began earlier has no such
// marker and asks each older patch where it always did, so it replays exactly as it ran.
//
// Why once, at the start: a patched() call made after a local activity resolves can land in a
// different workflow task when the local activity outlives its task (the SDK heartbeats the task)
// than when the history is replayed, and the replay then fails with "Non-deprecated patch marker
// encountered". Runs that use local activities therefore decide every patch before the first one.
// A later change that needs a patch adds a new epoch here, asked at the start the same way. The SDK
// asks patched() itself in condition(fn, 0): code on the epoch never waits 0 ms.
import { patched } from '@temporalio/workflow';

/** The store steps run as local activities (pools.ts); every older patch applies. */
export const LOCAL_STEPS_EPOCH = 'local-steps-epoch-v1';

/**
 * Runs that began before outcomes became results and stops became parking end as they did then:
 * a stop fails the workflow. Every newer run completes with its outcome, or parks for a person.
 */
export const PARKING = 'outcomes-and-parking';
/** Runs from before the gate awaited the provider's webhook poll as they did then, within the run's budget. */
export const AWAIT_PROVIDER = 'await-provider-callback';
/** Runs from before the bulkheads schedule every activity on the workflow's own task queue. */
export const BULKHEADS = 'bulkheads-v1';
/** Runs from before an attempt's several requests were paid for whole schedule it with fewer calls left. */
export const WHOLE_ATTEMPTS = 'whole-attempts-in-budget';

/** Patches older than LOCAL_STEPS_EPOCH: a run that recorded the epoch takes all of their new branches. */
const BEFORE_EPOCH: ReadonlySet<string> = new Set([PARKING, AWAIT_PROVIDER, BULKHEADS, WHOLE_ATTEMPTS]);

/**
 * The fixes of the payments review (issue 23): a run that began before them keeps the paths it
 * took, so it replays as it ran. Asked at the start, like the epoch, for the same reason. Every fix
 * under it ships in one release: no build with only some of them ever ran a refund.
 */
export const REVIEW_FIXES = 'payments-review-fixes-v1';

/** Per run: each run has its own instance of this module. Unset in workflows that never ask (the sweep, the digest …). */
let epoch: boolean | undefined;
let reviewed: boolean | undefined;

/** Called first thing in the refund workflow, before anything can be awaited. */
export function decideVersion(): void {
  epoch = patched(LOCAL_STEPS_EPOCH);
  reviewed = patched(REVIEW_FIXES);
}

/** Whether this run started with the payments review's fixes. */
export function reviewFixes(): boolean {
  return reviewed === true;
}

/** Whether this run started with the local steps. */
export function localSteps(): boolean {
  return epoch === true;
}

/**
 * The wait to pass to condition(fn, ms) for a wait of `ms` (0 or less: none left). The SDK asks
 * patched() itself inside condition(fn, 0), so a run on the epoch waits at least 1 ms; an older
 * run keeps the exact wait it always had, so it replays unchanged.
 */
export function conditionTimeout(ms: number): number {
  return Math.max(localSteps() ? 1 : 0, ms);
}

/** patched(id) for a patch older than the epoch; a run on the epoch records no marker for it. */
export function isPatched(id: string): boolean {
  if (!BEFORE_EPOCH.has(id)) throw new Error(`patch ${id} is not one the epoch covers: ask patched() at the start of the run (see versions.ts)`);
  return epoch === true || patched(id);
}
