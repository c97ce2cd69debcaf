// What a saga that keeps what it did in its own state gets without writing it: a compensate decision
// undoes what stands; a reconcile asks the provider about its send. And every saga's cancellation: it
// honours a decision taken before it, asks about a send that was in flight, and undoes what stands.
import { audit } from './audit';
import type { DecisionRecord, RunStatus } from '../../contract';
import type { Resumed } from './desk';
import { lookUp, type ReconciledSend, unknownSend } from './reconciled-send';
import type { SagaRun as Run } from './run';
import { isStopped, Stopped } from './run-stopped';
import { undoInOrder } from './undo';

type Send<Step extends string> = Omit<ReconciledSend<Step, unknown>, 'send'>;

/** Undoes what stands, and the run stops: compensated (stopped, when nothing stood), or for a person at the first step left open. */
export async function undoAndStop<Step extends string>(
  run: Run<Step>,
  why: string,
  at: Step | null,
  resendApprovedAt?: string,
): Promise<Stopped<Step>> {
  const plan = run.undoPlan(resendApprovedAt);
  const { status, reason, open } = await undoInOrder(run, plan, why);
  const ended = status === 'compensated' && plan.length === 0 ? 'stopped' : status;
  return new Stopped(ended, reason, open[0] ?? at, open.length > 0);
}

/** What a compensate or a reconcile decision does before the body runs again, or the stop it comes to. */
export async function prepareFromState<Step extends string>(
  run: Run<Step>,
  chosen: Resumed<Step>,
  send?: Send<Step>,
): Promise<Stopped<Step> | undefined> {
  const { record } = chosen;
  if (chosen.kind === 'compensate')
    return undoAndStop(run, `compensated as ${record.by} decided: ${record.reason}`, send?.step ?? null, record.at);
  if (chosen.kind !== 'reconcile' || !send) return;
  const { step } = send;
  const found = await lookUp(run, send);
  if (isStopped<Step, unknown>(found)) return found;
  if (found === 'unknown') return new Stopped('needs_attention', unknownSend(step), step, true);
  const absent = `${step} was proven absent: it took no effect. retry-step ${step} sends it, compensate undoes what stands`;
  if (found === 'absent') return new Stopped('needs_attention', absent, step);
}

/** What a cancellation says of a decision to abandon taken before it, and how it undoes what stands: the stop it comes to. */
export interface Cancelling<Step extends string, R> {
  abandoned(record: DecisionRecord, was: RunStatus): string;
  undo(run: R, was: RunStatus, resendApprovedAt?: string): Promise<Stopped<Step>>;
}

/** A saga that keeps what it did in its own state undoes its undo plan. */
const fromState = <Step extends string>(): Cancelling<Step, Run<Step>> => ({
  abandoned: (record, was) => `cancelled while ${was}, after ${record.by} abandoned it: ${record.reason}`,
  undo: (run, was, resendApprovedAt) => undoAndStop(run, `cancelled while ${was}`, null, resendApprovedAt),
});

/**
 * Cancelled by an operator, for every saga: a decision taken before the cancel is honoured, a send that was in flight
 * is asked about, and what stands is undone (compensations never stop for a cancellation), as `own` says or from state.
 */
export async function cancelRun<Step extends string, R extends Run<Step>>(
  run: R,
  send?: Send<Step>,
  own: Cancelling<Step, R> = fromState<Step>(),
): Promise<void> {
  const was = run.status;
  const taken = run.takenDecision();
  // A send that had started may be going on at the provider: it is asked, never taken for "not sent".
  const sending = send && !['pending', 'completed'].includes(run.steps.get(send.step).status);
  const found = sending ? await lookUp(run, send) : undefined;
  let stop: Stopped<Step>;
  if (taken?.kind === 'abandon') stop = new Stopped<Step>('abandoned', own.abandoned(taken.record, was), null);
  // A lookup that stops the run leaves the send as unknown as one that found nothing.
  else if (found === 'unknown' || isStopped(found)) {
    const reason = `cancelled while ${was}: the ${run.effectName} is unknown; a person reconciles it`;
    stop = new Stopped('needs_attention', reason, send!.step);
  } else stop = await own.undo(run, was, taken?.kind === 'compensate' ? taken.record.at : undefined);
  if (stop.status !== 'needs_attention') run.end(stop.status, stop.reason, stop.failedStep);
  else {
    run.finish('needs_attention', stop.reason, stop.failedStep);
    run.flagForAttention();
  }
  await audit(run, 'cancelled', stop.reason, null);
}
