// What a saga that keeps what it did in its own state gets without writing it: a compensate decision
// undoes what stands; a reconcile asks the provider about its send; a cancellation honours a
// decision taken before it, asks about a send that was in flight, and undoes what stands.
import { audit } from './audit';
import type { Resumed } from './desk';
import { lookUp, type ReconciledSend, unknownSend } from './reconciled-send';
import type { SagaRun as Run } from './run';
import { isStopped, Stopped } from './run-stopped';
import { undoInOrder } from './undo';

type Send<Step extends string> = Omit<ReconciledSend<Step, unknown>, 'send'>;

/** Undoes what stands, and the run stops: compensated, or for a person at the first step left open. */
export async function undoAndStop<Step extends string>(
  run: Run<Step>,
  why: string,
  at: Step | null,
  resendApprovedAt?: string,
): Promise<Stopped<Step>> {
  const { status, reason, open } = await undoInOrder(run, run.undoPlan(resendApprovedAt), why);
  return new Stopped(status, reason, open[0] ?? at, open.length > 0);
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
  if (found === 'absent')
    return new Stopped(
      'needs_attention',
      `${step} was proven absent: it took no effect. retry-step ${step} sends it, compensate undoes what stands`,
      step,
    );
}

/** Cancelled by an operator: what was started is finished honestly (compensations never stop for a cancellation). */
export async function cancelFromState<Step extends string>(run: Run<Step>, send?: Send<Step>): Promise<void> {
  const taken = run.takenDecision();
  let reason = `cancelled while ${run.status}`;
  // A send that had started may be going on at the provider: it is asked, never taken for "not sent".
  const sending = send && !['pending', 'completed'].includes(run.steps.get(send.step).status);
  const found = sending ? await lookUp(run, send) : undefined;
  if (taken?.kind === 'abandon')
    run.end('abandoned', (reason = `${reason}, after ${taken.record.by} abandoned it: ${taken.record.reason}`), null);
  // A lookup that stops the run leaves the send as unknown as one that found nothing.
  else if (found === 'unknown' || isStopped(found)) {
    reason = `${reason}: the ${run.effectName} is unknown; a person reconciles it`;
    run.finish('needs_attention', reason, send!.step);
    run.flagForAttention();
  } else {
    const plan = run.undoPlan(taken?.kind === 'compensate' ? taken.record.at : undefined);
    const done = await undoInOrder(run, plan, reason);
    reason = done.reason;
    if (done.status === 'compensated') run.end(plan.length > 0 ? 'compensated' : 'stopped', reason, null);
    else {
      run.finish('needs_attention', reason, done.open[0] ?? null);
      run.flagForAttention();
    }
  }
  await audit(run, 'cancelled', reason, null);
}
