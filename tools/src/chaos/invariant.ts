// An invariant of a chaos run: checked for each run from where its effects landed, with the first
// violations it found; and how a run ended, as the invariants read it.
import type { RunOutcome } from '../../../src/client/outcome';

export type RunOutcomeSummary =
  | { kind: 'result'; status: string; reason?: string }
  | { kind: 'parked'; status: string; verdict: string | null; effect: string; reason: string }
  /** The workflow failed, was terminated, or could not be started: a lost run. */
  | { kind: 'error'; status: 'error'; reason: string };

export interface Invariant {
  name: string;
  holds: boolean;
  checked: number;
  violations: string[];
}

export const invariant = (name: string): Invariant => ({ name, holds: true, checked: 0, violations: [] });

export function fail(i: Invariant, why: string): void {
  i.holds = false;
  if (i.violations.length < 50) i.violations.push(why);
}

/** How a run ended, as the invariants read it (null: it had not by the time it was given). */
export function summarizeOutcome(outcome: RunOutcome | Error | null): RunOutcomeSummary | null {
  if (!outcome) return null;
  if (outcome instanceof Error) return { kind: 'error', status: 'error', reason: outcome.message };
  if (outcome.kind === 'result')
    return {
      kind: 'result',
      status: outcome.result.status,
      ...('reason' in outcome.result && { reason: outcome.result.reason }),
    };
  const { state } = outcome;
  return {
    kind: 'parked',
    status: state.status,
    verdict: state.parked?.verdict ?? null,
    effect: state.effect.status,
    reason: state.parked?.reason ?? state.outcome?.reason ?? '',
  };
}
