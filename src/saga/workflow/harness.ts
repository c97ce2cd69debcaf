// The loop every saga's run is: its messages, its body until it completes or stops, parking for a person between
// a stop and a decision, and its cancellation. A saga returns a stop (Stopped) as a value: only here is it acted on.
import {
  CancellationScope,
  condition,
  isCancellation,
  metricMeter,
  patched,
  setHandler,
  workflowInfo,
  type QueryDefinition,
} from '@temporalio/workflow';
import type { z } from 'zod';
import { decisionUpdate } from '../../contract';
import { refundMetrics } from '../../observability/metrics';
import type { DecisionPolicy } from '../../reliability/policy';
import { pooledActivities } from '../../workflows/pools';
import { BOOKKEEPING } from './activity-options';
import { audit, decisionDetail } from './audit';
import type { Chosen, Resumed } from './desk';
import { failingTheUpdateOnly, refusePlaintext, setQueryHandler } from './messages';
import type { ReconciledSend } from './reconciled-send';
import { isStopped, Stopped, StoppedError } from './run-stopped';
import type { Ending, SagaRun } from './run';
import { StepFailedError, type StepError } from './step-failure';
import { cancelRun, type Cancelling, prepareFromState } from './undo-from-state';
import { showRejected } from './visibility';

/** The provider's word that moves a parked run without a person: what it audits, and how the run goes on. */
export interface News<Result, Step extends string> {
  reason: string;
  detail: Record<string, unknown>;
  resume: () => Promise<Result | Stopped<Step>>;
}

export interface Saga<Step extends string, State, Run extends SagaRun<Step, State>, Result> {
  stateQuery: QueryDefinition<State>;
  /** The run for a valid input; throws, saying why, for one that is not (nothing has run then). */
  start(input: unknown): Run;
  /** The business key a result and a refused run's search attributes name the run by, read from an input (null: none valid). */
  key: { field: string; of(input: unknown): string | null };
  /** Messages of the saga's own beyond the state Query and the decide Update. */
  handlers?(run: Run): void;
  /** The saga, top to bottom. A decision runs it again: steps that finished give their outputs back. */
  body(run: Run, resumed: Resumed<Step> | null): Promise<Result | Stopped<Step>>;
  /** What a decision does before the body runs again (a lookup, a person's word recorded), or the stop it comes to. */
  prepare?(run: Run, chosen: Resumed<Step>): Promise<void | Stopped<Step>>;
  /** The send a cancellation, and a reconcile decision of a saga without its own `prepare`, asks the provider about. */
  send?(run: Run): Omit<ReconciledSend<Step, unknown>, 'send'>;
  /** How a step's failure its body did not decide on stops the run; the harness's word at the step if not said. */
  stepFailed?(run: Run, step: Step, error: StepError): Stopped<Step>;
  /** The provider's word, while parked, that settles what the run holds without a person. */
  news?(run: Run): (() => News<Result, Step>) | undefined;
  /** After the run's last word, cancelled too: what it leaves for others (the provider's unacted news). */
  afterEnd?(run: Run): Promise<void>;
  /** Cancelled by an operator: the saga's word on an abandon taken before, and its undo; from its state if not said. */
  cancelled?: Cancelling<Step, Run>;
}

/** A saga's business key: the field of its input, read as `schema` reads it (null when not valid). */
export const keyField = (field: string, schema: z.ZodType<string>) => ({
  field,
  of: (input: unknown) => schema.safeParse((input as Record<string, unknown> | null)?.[field]).data ?? null,
});

/** Runs a saga to its result. */
export async function runSaga<Step extends string, State, Run extends SagaRun<Step, State>, Result>(
  saga: Saga<Step, State, Run, Result>,
  input: unknown,
): Promise<Result> {
  // Not a rejected request but a caller to redirect: Failed, its reason readable without the codec, nothing ran.
  refusePlaintext(input);
  metrics().runStarted();
  let run: Run;
  try {
    run = saga.start(input);
  } catch (err) {
    metrics().runEnded('rejected');
    const reason = (err as Error).message;
    const key = saga.key.of(input);
    showRejected(key, reason);
    return unfinished(saga, key, null, 'rejected', reason, null);
  }
  setQueryHandler(saga.stateQuery, () => run.view());
  saga.handlers?.(run);
  setHandler(
    decisionUpdate,
    (decision) =>
      failingTheUpdateOnly('the decision', () => {
        const record = run.desk.apply(decision);
        run.noteDecision();
        return record;
      }),
    {
      validator: (decision) => {
        refusePlaintext(decision);
        run.desk.validate(decision);
      },
    },
  );

  // The one place a run's cancellation is handled: wherever it lands (a step, a park's bookkeeping, a wait, a
  // decision's audit), the run ends with its word, compensates what it can and leaves the rest for others.
  try {
    return await drive(saga, run);
  } catch (err) {
    if (isCancellation(err) && (!run.inBookkeeping || cancelsAnywhere())) {
      run.desk.close('it is being cancelled');
      await CancellationScope.nonCancellable(async () => {
        await cancelRun(run, saga.send?.(run), saga.cancelled);
        metrics().runEnded('cancelled');
        await saga.afterEnd?.(run);
      });
    }
    throw err;
  }
}

/** The body until it completes or ends, parking for a person between; a cancellation passes through untouched. */
async function drive<Step extends string, State, Run extends SagaRun<Step, State>, Result>(
  saga: Saga<Step, State, Run, Result>,
  run: Run,
): Promise<Result> {
  let next = () => saga.body(run, null);
  for (;;) {
    let outcome: Result | Stopped<Step>;
    run.inBookkeeping = false;
    try {
      outcome = await next();
    } catch (err) {
      if (isCancellation(err)) throw err;
      outcome = stoppedBy(run, err, saga.stepFailed);
    }
    if (!isStopped(outcome)) {
      run.finish('completed', 'every check of the completion gate passed', null);
      metrics().runEnded('completed');
      await saga.afterEnd?.(run);
      return outcome;
    }
    const stopped: Stopped<Step> = outcome;
    run.inBookkeeping = true;
    if (stopped.status !== 'needs_attention') return end(saga, run, stopped.status, stopped.reason, stopped.failedStep);

    const chosen = await parkUntilDecided(saga, run, stopped);
    if (typeof chosen === 'function') {
      const news = chosen();
      await audit(run, 'running', news.reason, stopped.failedStep, 'decision', news.detail);
      run.unpark();
      next = news.resume;
      continue;
    }
    const { record } = chosen;
    await audit(run, chosen.kind, record.reason, stopped.failedStep, 'decision', decisionDetail(run, record));
    if (chosen.kind === 'abandon')
      return end(saga, run, 'abandoned', abandoned(record.by, record.reason), stopped.failedStep);
    if (chosen.kind === 'expired') {
      // Stopped is the safe default, never proceeding; what the run leaves unsettled still waits for a person.
      const expired = `${record.decision} proposed by ${record.by} was not approved before ${record.expiresAt}; the run stops and nothing more is done`;
      const result = await end(saga, run, 'stopped', expired, stopped.failedStep);
      if (run.leavesWorkBehind()) run.flagForAttention();
      return result;
    }
    run.unpark();
    const prepare = saga.prepare ?? ((r: Run, c: Resumed<Step>) => prepareFromState(r, c, saga.send?.(r)));
    next = () => prepare(run, chosen).then((prepared) => (isStopped(prepared) ? prepared : saga.body(run, chosen)));
  }
}

/** Parks the run and waits for a decision, or for the provider's word that settles what it holds. */
async function parkUntilDecided<Step extends string, State, Run extends SagaRun<Step, State>, Result>(
  saga: Saga<Step, State, Run, Result>,
  run: Run,
  stopped: Stopped<Step>,
): Promise<Chosen<Step> | (() => News<Result, Step>)> {
  // Who may decide is read as the workers are configured now, also for a run that never loaded its settings; a
  // worker that cannot say leaves the run's own policy in force, and a cancellation goes on to the run's handler.
  await pooledActivities<{ decisionPolicy(): Promise<DecisionPolicy> }>(BOOKKEEPING)
    .decisionPolicy()
    .then(
      (decisions) => run.useDecisionPolicy(decisions),
      (err: unknown) => {
        if (isCancellation(err) && cancelsAnywhere()) throw err;
      },
    );
  const verdict = run.park(stopped);
  metrics().runParked(verdict);
  await audit(run, 'needs_attention', stopped.reason, stopped.failedStep, 'run_parked', { verdict });
  let news: (() => News<Result, Step>) | undefined;
  const heard = () => (news = run.desk.awaitingApproval ? undefined : saga.news?.(run)) !== undefined;
  run.inBookkeeping = false;
  const chosen = await Promise.race([run.desk.next(), condition(heard).then(() => news!)]);
  run.inBookkeeping = true;
  // A decide Update and the provider's word in one workflow task: the race may pick either, the decision must win.
  return run.desk.firstOf(chosen);
}

/** Ends the run with an outcome that is a result, not a failure. */
async function end<Step extends string, State, Run extends SagaRun<Step, State>, Result>(
  saga: Saga<Step, State, Run, Result>,
  run: Run,
  status: Ending,
  reason: string,
  failedStep: Step | null,
): Promise<Result> {
  run.end(status, reason, failedStep);
  metrics().runEnded(status);
  await CancellationScope.nonCancellable(() => audit(run, status, reason, failedStep));
  await saga.afterEnd?.(run);
  return unfinished(saga, saga.key.of(run.request), run.operationId || null, status, reason, failedStep);
}

/** The result of a run that did not complete: refused before anything ran, or ended another way. */
function unfinished<Result>(
  saga: { key: { field: string } },
  key: string | null,
  operationId: string | null,
  status: Ending,
  reason: string,
  failedStep: string | null,
): Result {
  const { workflowId } = workflowInfo();
  return { workflowId, [saga.key.field]: key, operationId, status, reason, failedStep } as Result;
}

/**
 * Whether a cancellation that lands in the park's bookkeeping takes the cancellation path (1.0 histories, which let
 * it close the run, replay as they ran). Asked only there, in the cancel's own task, so other runs carry no marker.
 */
const cancelsAnywhere = () => patched('cancel-anywhere');

/** Every saga's run counters (recording nothing on replay: a run is counted once); the workflowType label tells sagas apart. */
const metrics = () => refundMetrics(metricMeter);

/** What a throw out of the body comes to: a step call's stop, or a step failure no branch decided on, which still stops the run. */
function stoppedBy<Step extends string, Run extends SagaRun<Step, unknown>>(
  run: Run,
  err: unknown,
  stepFailed?: (run: Run, step: Step, error: StepError) => Stopped<Step>,
): Stopped<Step> {
  if (err instanceof StoppedError) return err.stopped as Stopped<Step>;
  if (!(err instanceof StepFailedError)) throw err;
  const { step, error } = err;
  const at = run.steps.has(step) ? step : null;
  if (at && stepFailed) return stepFailed(run, at, error);
  const mayHave = error.certainty !== 'not_executed';
  const reason = `${step} failed (${error.code}: ${error.message})${mayHave ? '; it may have taken effect' : ''}`;
  return new Stopped('needs_attention', `${reason}. retry-step ${at ?? 'it'}, or compensate`, at, mayHave);
}

export const abandoned = (by: string, reason: string) => `abandoned by ${by}: ${reason}`;
