// One compensation, run under its own key: how every saga's run and the refund's follow-up undo a step. What came of
// it is a value: completed with its receipt, failed, or unknown.
import { CancellationScope, patched, sleep } from '@temporalio/workflow';
import type { z } from 'zod';
import { evidenced } from '../../contract';
import { tally, type StepEvidence } from '../../reliability/attempt-ledger';
import type { RecoveryPolicy } from '../../reliability/policy';
import type { Boundary } from '../../reliability/taxonomy';
import type { RunBudget } from './budget';
import type { Activities } from './calls';
import type { CompensationOutcome, StepRunner } from './step-runner';
import { describeFailure, StepFailedError, unusable } from './step-failure';
import { awaitProvider, nextLook } from './wait';

/** A compensation's call: the activity, its dependency, and the receipt it must return. */
export interface UndoCall {
  activity: string;
  boundary: Boundary;
  output: z.ZodObject;
  /** Whether its receipt says the step is undone (a refund the provider failed gave no money back); yes if not said. */
  undone?(receipt: never): boolean;
  /** Whether its receipt is not final yet (a refund the provider still processes): asked again until it is. */
  pending?(receipt: never): boolean;
}

/** Runs `step`'s compensation `undo` with `input` on `activities` (built on call: a budget that cannot schedule it is a failure). */
export async function runUndo(
  step: string,
  undo: UndoCall,
  input: unknown,
  activities: () => Activities,
): Promise<CompensationOutcome> {
  let raw: unknown;
  try {
    raw = await activities()[undo.activity]!(input);
  } catch (err) {
    // It could not even be scheduled (the run's deadline has passed): a person must finish it.
    if (err instanceof StepFailedError)
      return { status: 'failed', error: err.error, attempts: 0, transportRequests: 0 };
    const { error, ledger } = describeFailure(err, undo.boundary, `${step} compensation`, undo.boundary !== 'store');
    // Unknown (quarantined) when it may have taken effect: another attempt may be sending the correction right now.
    const unknown = error.code === 'UNKNOWN_OUTCOME' || error.certainty === 'may_have_executed';
    return { status: unknown ? 'unknown' : 'failed', error, ...tally({ attempt: ledger.length, ledger }) };
  }
  const parsed = evidenced(undo.output).safeParse(raw);
  // It finished, so whatever it did happened; what it returned cannot be used as its receipt.
  if (!parsed.success) {
    const error = unusable(`${step}'s compensation returned a result that is not its receipt`);
    return { status: 'unknown', error, attempts: 0, transportRequests: 0 };
  }
  const { evidence, ...output } = parsed.data as Record<string, unknown> & { evidence: StepEvidence };
  return { status: 'completed', output, ...tally(evidence) };
}

/** A step's compensation as a run plans it: under its own key, with its input; `after` another step's undo, if said. */
export interface PlannedUndo<Step extends string> {
  step: Step;
  key: string;
  undo: UndoCall;
  input: unknown;
  after?: Step;
}

type UndoingRun<Step extends string> = Parameters<typeof undoSteps<Step>>[0] & {
  setStatus(status: 'compensating'): void;
};

/**
 * Whether an undo's receipt is not final yet, so the undo waits for it. Runs begun before took every receipt as final
 * (a pending refund as undone) and replay so; decided only for a receipt the undo calls pending, so no other run changes.
 * The run's answer is kept in its step table: patched once, in the undo (`decide`), never in a query.
 */
function notFinal(steps: StepRunner<string>, undo: UndoCall, receipt: unknown, decide = false): boolean {
  if (undo.pending?.(receipt as never) !== true) return false;
  if (decide) steps.undoWaitsForFinal ??= patched('undo-waits-for-final-receipt');
  return steps.undoWaitsForFinal ?? false;
}

/** Whether the step's compensation completed with a receipt that says it is undone. */
export function isUndone<Step extends string>(run: UndoingRun<Step>, { step, undo }: PlannedUndo<Step>): boolean {
  const done = run.steps.get(step).compensation;
  if (done?.status !== 'completed') return false;
  if (undo.pending?.(done.output as never)) return !notFinal(run.steps, undo, done.output);
  return undo.undone?.(done.output as never) ?? true;
}

/** Undoes what the plan says stands, never stopped by a cancellation, an undo planned `after` another only once that one is. */
export async function undoInOrder<Step extends string>(run: UndoingRun<Step>, plan: PlannedUndo<Step>[], why: string) {
  run.setStatus('compensating');
  const [first, then] = [plan.filter((p) => !p.after), plan.filter((p) => p.after)];
  const ready = (p: PlannedUndo<Step>) => plan.every((q) => q.step !== p.after || isUndone(run, q));
  await CancellationScope.nonCancellable(async () => {
    await undoSteps(run, first);
    await undoSteps(run, then.filter(ready));
  });
  // What stops the run first is an undo of its own, before one that waits for it (the refund before its correction).
  const open = [...first, ...then].filter((p) => !isUndone(run, p)).map((p) => p.step);
  const undone = run.steps
    .table()
    .filter((s) => s.compensation?.status === 'completed')
    .map((s) => `${s.name} (key ${s.compensation!.key})`);
  return open.length === 0
    ? { status: 'compensated' as const, reason: `${why}. Undone: ${undone.join(', ') || 'nothing stood'}`, open }
    : {
        status: 'needs_attention' as const,
        reason: `${why}. Not undone: ${open.join(', ')}; a person finishes it`,
        open,
      };
}

/** Runs each planned compensation, in order, unless it completed before with a final receipt; held only to the deadline. */
export async function undoSteps<Step extends string>(
  run: {
    steps: StepRunner<Step>;
    budget: Pick<RunBudget, 'spend'> & Partial<Pick<RunBudget, 'holdUntil'>>;
    /** Its awaitProvider settings pace an undo whose receipt is not final; the defaults without one. */
    policy?: RecoveryPolicy;
    calls: { activities(boundary: Boundary, essential: boolean): Activities };
  },
  plan: PlannedUndo<Step>[],
): Promise<void> {
  for (const { step, key, undo, input } of plan) {
    const done = run.steps.get(step).compensation;
    if (done?.status === 'completed' && !notFinal(run.steps, undo, done.output, true)) continue;
    await run.steps.compensate(step, key, () =>
      untilFinal(undo, run, () => runUndo(step, undo, input, () => run.calls.activities(undo.boundary, true))),
    );
    run.budget.spend({
      provider: undo.boundary !== 'store',
      transportRequests: run.steps.get(step).compensation?.transportRequests ?? 0,
    });
  }
}

/** An undo whose receipt is not final is asked again until it is: a correction never goes out for money not yet given back. */
async function untilFinal(
  undo: UndoCall,
  run: { steps: StepRunner<string>; policy?: RecoveryPolicy; budget: Partial<Pick<RunBudget, 'holdUntil'>> },
  call: () => Promise<CompensationOutcome>,
): Promise<CompensationOutcome> {
  const settings = awaitProvider(run.policy);
  const until = Date.now() + settings.deadlineMs;
  let outcome = await call();
  let { attempts, transportRequests } = outcome;
  const waiting = () => outcome.status === 'completed' && notFinal(run.steps, undo, outcome.output, true);
  // Held to the wait's deadline, not the run's: its looks must be schedulable while the provider settles it.
  if (waiting()) run.budget.holdUntil?.(until + (run.policy?.timeouts[undo.boundary]?.scheduleToCloseMs ?? 0));
  for (let polls = 1; waiting(); polls++) {
    const wait = nextLook(settings, polls, until);
    if (wait <= 0) break;
    await sleep(wait);
    const next = await call();
    attempts += next.attempts;
    transportRequests += next.transportRequests;
    // A look that failed takes nothing back from the receipt in hand: the undo stays pending, for a person.
    if (next.status !== 'completed') break;
    outcome = next;
  }
  return { ...outcome, attempts, transportRequests };
}
