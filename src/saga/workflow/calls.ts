// A saga run's activity calls, paid for from its budget: each scheduled with options derived from
// the policy and what is left of the budget, each result checked against its schema, each attempt's
// provider requests and retry time charged once.
import { patched } from '@temporalio/workflow';
import { evidenced, type Evidenced, type StepRecord } from '../../contract';
import { tally, type AttemptSummary, type StepEvidence } from '../../reliability/attempt-ledger';
import type { RecoveryPolicy } from '../../reliability/policy';
import type { Boundary } from '../../reliability/taxonomy';
import type { Runs, StepCall } from '../step';
import { activitiesAt } from '../../workflows/pools';
import { describeFailure, stepError, StepFailedError, type StepError } from './step-failure';
import { BudgetExhausted, type RunBudget } from './budget';
import { stop } from './run-stopped';
import type { StepRunner } from './step-runner';

/** A saga's activities, each taking one input. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Activities = { [name: string]: (input: any) => Promise<unknown> };
/** A call of a step, as its definition says, under the step's name in the table. */
type NamedCall<Acts, A extends keyof Acts & string, Step> = StepCall<A, never> & { name: Step };
/** What the activity takes, and what it returns without its evidence. */
type Fn<Acts, A extends keyof Acts> = Acts[A] extends (input: infer I) => Promise<infer R> ? [I, R] : never;
type InputOf<Acts, A extends keyof Acts> = Fn<Acts, A>[0];
type ResultOf<Acts, A extends keyof Acts> = Omit<Fn<Acts, A>[1], 'evidence'>;

export class ActivityCalls<Acts extends Activities, Step extends string> {
  /** How much of each step's ledger the budget has already been charged for. */
  private readonly paid = new Map<string, number>();
  /** The requests charged for each attempt of a call outside the step table, by attempt. */
  private readonly charged = new Map<string, number>();

  constructor(
    private readonly budget: RunBudget,
    private readonly steps: StepRunner<Step>,
    private readonly policy: () => RecoveryPolicy,
    /** Keeps a failure and the move the policy prescribes for it. */
    private readonly remember: (step: string, boundary: Boundary, error: StepError) => void,
  ) {}

  /** The activities at one boundary, where `runs` says (each on its pool's queue by default), with options derived from the policy and what is left of the budget. */
  activities(boundary: Boundary, essential = false, requestsPerAttempt = 1, runs?: Runs): Acts {
    try {
      return activitiesAt<Acts>(runs, this.budget.options(this.policy(), boundary, essential, requestsPerAttempt));
    } catch (err) {
      if (err instanceof BudgetExhausted)
        throw new StepFailedError('budget', stepError('BUDGET_EXCEEDED', 'not_executed', 'run_budget', err.message));
      throw err;
    }
  }

  /** Runs a saga step as its definition says, paying for it from the budget and remembering how it failed. */
  async step<A extends keyof Acts & string>(
    def: NamedCall<Acts, A, Step>,
    input: InputOf<Acts, A>,
    options: { essential?: boolean } = {},
  ): Promise<ResultOf<Acts, A>> {
    const keyOf = def.key as ((input: InputOf<Acts, A>) => string) | undefined;
    const shows = def.shows as ((input: InputOf<Acts, A>) => unknown) | undefined;
    const { name, boundary } = def;
    try {
      const acts = this.activities(boundary, options.essential ?? def.essential, def.requestsPerAttempt, def.runs);
      return await this.steps.run(
        name,
        shows ? shows(input) : input,
        keyOf?.(input),
        boundary,
        evidenced(def.output),
        () => invoke(acts, def.activity, input) as Promise<ResultOf<Acts, A> & { evidence: StepEvidence }>,
        def.effect === 'send',
      );
    } catch (err) {
      if (!(err instanceof StepFailedError)) throw err;
      this.remember(name, boundary, err.error);
      // A step its budget could not schedule failed as that step: a person's retry-step is taken at it.
      if (err.step === 'budget') {
        this.steps.fail(name, err.error);
        throw new StepFailedError(name, err.error);
      }
      const { code, certainty, message } = err.error;
      const refused = code === 'PERMANENT_BUSINESS' || code === 'INVALID_ARGUMENTS';
      const rejects = def.rejects as ((input: InputOf<Acts, A>) => string) | undefined;
      if (rejects && refused && certainty === 'not_executed') stop('rejected', `${rejects(input)}: ${message}`, name);
      throw err;
    } finally {
      this.pay(this.steps.get(name), boundary);
    }
  }

  /** A call outside the step table (a reconciliation lookup), paid for and validated the same way. */
  async call<A extends keyof Acts & string>(
    what: string,
    def: StepCall<A, never>,
    input: InputOf<Acts, A>,
  ): Promise<ResultOf<Acts, A>> {
    const { boundary } = def;
    const acts = this.activities(boundary, def.essential, def.requestsPerAttempt, def.runs);
    let raw: unknown;
    try {
      raw = await invoke(acts, def.activity, input);
    } catch (err) {
      const { error, ledger } = describeFailure(err, boundary, what, false);
      this.charge(boundary, { attempt: ledger.length, ledger });
      throw new StepFailedError(what, error);
    }
    const parsed = evidenced(def.output).safeParse(raw);
    if (!parsed.success)
      throw new StepFailedError(
        what,
        stepError('POISON', 'undeterminable', 'result_unusable', `${what} returned a result the workflow cannot use`),
      );
    // The parsed result: a field an older worker did not send gets its schema's default.
    const { evidence, ...result } = parsed.data as Evidenced<ResultOf<Acts, A>>;
    this.charge(boundary, evidence);
    return result as ResultOf<Acts, A>;
  }

  /**
   * Charges a call's evidence: its ledger holds every attempt of its key in this run, earlier calls' lookups too, so
   * each attempt's requests are charged once. Runs begun before counted earlier lookups again (their replay keeps it).
   */
  private charge(boundary: Boundary, evidence: StepEvidence | undefined): void {
    if (boundary === 'store') return;
    const rows = evidence?.ledger ?? [];
    const fresh = rows.reduce((n, a) => n + Math.max(0, a.transportRequests - (this.charged.get(rowId(a)) ?? 0)), 0);
    const all = tally(evidence).transportRequests;
    for (const a of rows) this.charged.set(rowId(a), Math.max(a.transportRequests, this.charged.get(rowId(a)) ?? 0));
    const once = fresh === all || patched('budget-charges-each-request-once');
    this.budget.spend({ provider: true, transportRequests: once ? fresh : all });
  }

  /** A step's provider requests and time spent retrying count against the run's budgets, each attempt once. */
  private pay(record: StepRecord, boundary: Boundary): void {
    const fresh = record.ledger.slice(this.paid.get(record.name) ?? 0);
    this.paid.set(record.name, record.ledger.length);
    const retryTimeMs =
      fresh.length > 1 ? Date.parse(fresh[fresh.length - 1]!.startedAt) - Date.parse(fresh[0]!.startedAt) : 0;
    this.budget.spend({
      provider: boundary !== 'store',
      transportRequests: fresh.reduce((n, a) => n + a.transportRequests, 0),
      retryTimeMs,
    });
  }
}

/** An attempt of a call, as every later ledger of its key shows it again. */
function rowId(a: AttemptSummary): string {
  return `${a.startedAt}#${a.attempt}`;
}

/** Calls the activity a definition names, with the step's input. */
function invoke(acts: Activities, activity: string, input: unknown): Promise<unknown> {
  return acts[activity]!(input);
}
