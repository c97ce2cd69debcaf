// A send whose answer may be lost, settled with the provider before it is ever sent again: its receipt found by its
// key; proven absent (sent again, or its failure returned); or unknown, which stops the run for a person.
import { type EffectStatus, MAX_RESUBMISSIONS, type RunStatus } from '../../contract';
import { mayHaveTakenEffect } from '../../reliability/attempt-ledger';
import type { Certainty } from '../../reliability/taxonomy';
import { isStopped, Stopped } from './run-stopped';
import { StepFailedError, type StepError } from './step-failure';
import type { StepRunner } from './step-runner';
import type { Lookup } from '../step';

/** What a lookup by the send's key came to: the receipt, proof the provider took nothing, or nothing certain. */
export type Found<R> = R | 'absent' | 'unknown';

/** A send's effect once settled: unknown, as certain as its last failure; none, proven absent; or its receipt's, certain. */
export function sentEffect<R, S extends EffectStatus>(
  found: Found<R>,
  lastFailure: { certainty: Certainty } | null,
  status: (receipt: R) => S,
) {
  if (found === 'unknown') return { status: 'unknown', certainty: lastFailure?.certainty ?? 'undeterminable' } as const;
  if (found === 'absent') return { status: 'none', certainty: 'not_executed' } as const;
  return { status: status(found), certainty: 'completed' } as const;
}

/** A run that sends: its steps, its status, and what it knows of the send now. */
export interface SendingRun<Step extends string, R> {
  readonly steps: StepRunner<Step>;
  setStatus(status: RunStatus, step?: string): void;
  /** The send is settled by its receipt, proven absent, or unknown; the run says what that means for its effect. */
  noteSend(found: Found<R>): void;
}

/** After a failed send: ask the provider and send again what it proves absent; ask, and return the failure if absent; or return it. */
export type AfterFailure = 'resend-if-absent' | 'fail-if-absent' | 'fail';

/** A send step, how to ask the provider about it by its key, and what a failure of it comes to (see `afterFailure`). */
export interface ReconciledSend<Step extends string, R> {
  step: Step;
  send(): Promise<R>;
  /** What the provider says of the send, or the stop it comes to (the saga's word on what it found). */
  lookUp(): Promise<Lookup<R> | Stopped<Step>>;
  /** By default a failure is asked about when any attempt may have taken effect, and returned if it took nothing. */
  afterFailure?(failure: StepError): AfterFailure;
}

/**
 * Sends, and after a failure any attempt of which may have taken effect, believes only the provider: found, its
 * receipt; proven absent, sent again (a failure that took nothing is returned); unknown, a person.
 */
export async function sendReconciled<Step extends string, R>(
  run: SendingRun<Step, R>,
  send: ReconciledSend<Step, R>,
): Promise<{ receipt: R } | { failed: StepError } | Stopped<Step>> {
  const { step } = send;
  for (let resent = 0; ; resent++) {
    let failure: StepError;
    try {
      const receipt = await send.send();
      run.noteSend(receipt);
      return { receipt };
    } catch (err) {
      if (!(err instanceof StepFailedError)) throw err;
      failure = err.error;
    }
    const after = send.afterFailure?.(failure) ?? mayHaveTaken(run.steps, step, failure);
    if (after === 'fail') return { failed: failure };
    const found = await lookUp(run, send);
    if (isStopped(found)) return found;
    if (found === 'unknown') return new Stopped('needs_attention', unknownSend(step), step, true);
    if (found !== 'absent') return { receipt: found };
    if (after === 'fail-if-absent') return { failed: failure };
    if (resent >= MAX_RESUBMISSIONS)
      return new Stopped('needs_attention', `${step} was proven absent ${resent + 1} times; a person decides`, step);
    run.setStatus('running', step);
  }
}

/** A failure that may have taken effect is asked about; one that took nothing, after attempts that may have, only confirmed. */
function mayHaveTaken<Step extends string>(steps: StepRunner<Step>, step: Step, failure: StepError): AfterFailure {
  if (failure.certainty !== 'not_executed') return 'resend-if-absent';
  return steps.get(step).ledger.some(mayHaveTakenEffect) ? 'fail-if-absent' : 'fail';
}

/** Asks the provider what became of the send, and records the answer on its step. */
export async function lookUp<Step extends string, R>(
  run: SendingRun<Step, R>,
  send: Omit<ReconciledSend<Step, R>, 'send'>,
): Promise<Found<R> | Stopped<Step>> {
  const { step } = send;
  run.noteSend('unknown');
  run.setStatus('reconciling', step);
  const found: Lookup<R> | Stopped<Step> = await send.lookUp().catch((err: unknown) => {
    // A lookup that failed says nothing; a step the lookup ran (the order repaired to a partial refund) failed as that step.
    if (!(err instanceof StepFailedError) || run.steps.has(err.step)) throw err;
    return { kind: 'unknown', receipt: null, note: err.error.message };
  });
  if (isStopped(found)) return found;
  run.steps.note(step, found.note);
  const { receipt } = found;
  if (receipt) {
    run.steps.resolve(step, receipt, `receipt from reconciliation: ${found.note}`);
    run.noteSend(receipt);
    run.setStatus('running', step);
    return receipt;
  }
  const what = found.kind === 'absent' ? 'absent' : 'unknown';
  run.noteSend(what);
  return what;
}

/** Why a run stops when its send's outcome is still unknown. */
export const unknownSend = (step: string) =>
  `${step}'s outcome is unknown: reconcile again (the sweep does), or retry-step ${step}`;
