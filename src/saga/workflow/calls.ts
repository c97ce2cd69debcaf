// A saga run's steps: each step's activity call as its definition says, paid for from the run's budget (each attempt
// once), its result checked against its schema, and recorded in the run's step table.
import { patched } from '@temporalio/workflow';
import {
  type Carried,
  evidenced,
  type FirstRead,
  ledgerSchema,
  type Read,
  type Evidenced,
  type StepRecord,
} from '../../contract';
import type { PinnedSettings } from '../../contract';
import { zodProblems } from '../../domain/zod-problems';
import { tally, type AttemptSummary, type StepEvidence } from '../../reliability/attempt-ledger';
import type { RecoveryPolicy } from '../../reliability/policy';
import type { Boundary } from '../../reliability/taxonomy';
import type { Runs, StepCall } from '../step';
import { pooledActivities } from '../../workflows/pools';
import { describeFailure, stepError, StepFailedError, unusable, type StepError } from './step-failure';
import { BudgetExhausted, type RunBudget } from './budget';
import { Stopped, StoppedError } from './run-stopped';
import { now, type StepRunner } from './step-runner';

/** A saga's activities, each taking one input. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Activities = { [name: string]: (input: any) => Promise<unknown> };
/** What the activity takes, and what it returns without its evidence. */
type InputOf<Acts extends Activities, A extends keyof Acts> = Parameters<Acts[A]>[0];
type ResultOf<Acts extends Activities, A extends keyof Acts> = Omit<Awaited<ReturnType<Acts[A]>>, 'evidence'>;

export class ActivityCalls<Acts extends Activities, Step extends string> {
  /** How much of each step's ledger the budget has already been charged for. */
  private readonly paid = new Map<string, number>();
  /** The requests charged for each attempt of a call outside the step table, by attempt. */
  private readonly charged = new Map<string, number>();
  /** What a send's receipt carried for later steps (their writes rode in its transaction), until the saga runs them. */
  private readonly carried = new Map<string, Carried[string]>();
  /** What a send's activity read for a later read step after its effect was recorded, until the saga runs it. */
  private readonly read = new Map<string, Read[string] & { input: unknown }>();
  /** Attempts a failed first read made of a step: its own task gets as many fewer (at least one). */
  private readonly readAttempts = new Map<string, number>();

  constructor(
    private readonly budget: RunBudget,
    private readonly steps: StepRunner<Step>,
    private readonly policy: () => RecoveryPolicy,
    /** Keeps a failure and the move the policy prescribes for it. */
    private readonly remember: (step: string, boundary: Boundary, error: StepError) => void,
    /** Takes the worker's settings a step's receipt hands the run; a step run again (a retried load) pins them again. */
    private readonly pin: (settings: PinnedSettings) => void,
  ) {}

  /** The activities at one boundary, where `runs` says (each on its pool's queue by default), with options derived from the policy and what is left of the budget. */
  activities(boundary: Boundary, essential = false, requestsPerAttempt = 1, runs?: Runs, attemptsMade = 0): Acts {
    try {
      const options = this.budget.options(this.policy(), boundary, { essential, requestsPerAttempt, attemptsMade });
      return pooledActivities<Acts>(options, runs);
    } catch (err) {
      if (err instanceof BudgetExhausted)
        throw new StepFailedError('budget', stepError('BUDGET_EXCEEDED', 'not_executed', 'run_budget', err.message));
      throw err;
    }
  }

  /**
   * Runs a saga step as its definition says (the activity's own retry policy is the only retry loop), and records it.
   * `readFirst`: a later read step (declared `firstReadIn` this one) its activity may make once its effect is recorded.
   */
  async step<A extends keyof Acts & string>(
    def: StepCall<A, InputOf<Acts, A>> & { name: Step },
    input: InputOf<Acts, A>,
    { essential, readFirst }: { essential?: boolean; readFirst?: ReadFirst<Step> } = {},
  ): Promise<ResultOf<Acts, A>> {
    const { name, boundary, rejects } = def;
    const record = this.steps.get(name);
    try {
      const output =
        this.takeCarried(def, input, record) ??
        this.takeRead(def, input, record) ??
        (await this.call(name, def, input, { essential, record, readFirst }));
      const { settings } = output as { settings?: PinnedSettings };
      if (settings) this.pin(settings);
      return output;
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
      if (rejects && refused && certainty === 'not_executed')
        throw new StoppedError(new Stopped('rejected', `${rejects(input)}: ${message}`, name));
      throw err;
    } finally {
      this.pay(record, boundary);
    }
  }

  /**
   * Calls the activity `def` names and checks its result against its schema. A step's `record` keeps what came of it
   * (its ledger paid for when the step ends); a call outside the table (a reconciliation lookup) is charged here.
   */
  async call<A extends keyof Acts & string>(
    what: string,
    def: StepCall<A, InputOf<Acts, A>>,
    input: InputOf<Acts, A>,
    {
      essential = def.essential,
      record,
      readFirst,
    }: { essential?: boolean; record?: StepRecord; readFirst?: ReadFirst<Step> } = {},
  ): Promise<ResultOf<Acts, A>> {
    const { boundary } = def;
    const attemptsMade = this.readAttempts.get(what) ?? 0;
    this.readAttempts.delete(what);
    const acts = this.activities(boundary, essential, def.requestsPerAttempt, def.runs, attemptsMade);
    const { read } = this.firstRead(def, what, readFirst);
    if (record) begin(record, def, input);
    const failed = (error: StepError, output?: { output: unknown }) => {
      if (record) Object.assign(record, { status: 'failed', error, ...output, finishedAt: now() });
      return new StepFailedError(what, error);
    };
    const keep = (ledger: AttemptSummary[], evidence?: StepEvidence) =>
      record ? absorb(record, ledger, evidence) : this.charge(boundary, evidence ?? { attempt: ledger.length, ledger });
    let raw: unknown;
    try {
      raw = await acts[def.activity]!({ ...input, ...(def.carries && { carry: def.carries }), ...(read && { read }) });
    } catch (err) {
      const { error, ledger } = describeFailure(err, boundary, what, def.effect === 'send');
      keep(ledger);
      throw failed(error);
    }
    const parsed = evidenced(def.output).safeParse(raw);
    if (!parsed.success) {
      // A step's record names what did not fit; a call's message stays as its callers' reasons quote it.
      const problems = record ? ` (${zodProblems(parsed.error, '(result)')})` : '';
      throw failed(unusable(`${what} returned a result the workflow cannot use${problems}`), { output: raw ?? null });
    }
    // The parsed result: a field an older worker did not send gets its schema's default.
    const { evidence, ...output } = parsed.data as Evidenced<ResultOf<Acts, A>>;
    keep(evidence?.ledger ?? [], evidence);
    if (record) Object.assign(record, { status: 'completed', output, finishedAt: now() });
    const { carried, read: made } = raw as { carried?: Carried; read?: Read };
    for (const step of def.carries ?? []) if (carried?.[step]) this.carried.set(step, carried[step]);
    if (read && made?.[read.step]) this.read.set(read.step, { ...made[read.step], input: read.input });
    return output as ResultOf<Acts, A>;
  }

  /**
   * The read a send's activity is asked to make after its effect: only the read step's first look, and only when the
   * run's budget would schedule it as its own task now (what is charged for it is charged as that task's would be).
   */
  private firstRead(host: StepCall<string, never>, what: string, readFirst: ReadFirst<Step> | undefined): FirstRead {
    if (!readFirst) return {};
    const { step, input } = readFirst;
    if (step.firstReadIn !== what) throw new Error(`step ${step.name} is not declared to be read first in ${what}`);
    const record = this.steps.get(step.name);
    if (record.status !== 'pending' || record.ledger.length > 0) return {};
    // Asked of the send's first attempt only (a retried send reads nothing), whose requests are paid for first.
    const hostSends = host.boundary === 'store' ? 0 : (host.requestsPerAttempt ?? 1);
    try {
      const { essential, requestsPerAttempt } = step;
      const options = this.budget.options(this.policy(), step.boundary, {
        essential,
        requestsPerAttempt,
        after: hostSends,
      });
      const startToCloseMs = Math.min(Number(options.startToCloseTimeout), Number(options.scheduleToCloseTimeout));
      return { read: { step: step.name, input, startToCloseMs } };
    } catch (err) {
      if (err instanceof BudgetExhausted) return {};
      throw err;
    }
  }

  /**
   * The step's result as an earlier send's activity read it, recorded and paid for as a call's; undefined when none
   * was read, or it was read with another input or does not fit its schema (a read runs again as its own task). A
   * look not taken (failed, not made, or made by an earlier attempt of the send) is paid for by its ledger at once.
   */
  private takeRead<A extends keyof Acts & string>(
    def: StepCall<A, InputOf<Acts, A>>,
    input: InputOf<Acts, A>,
    record: StepRecord,
  ): ResultOf<Acts, A> | undefined {
    const brought = this.brought(this.read, def, input, record);
    if (!brought) return undefined;
    const { made, result } = brought;
    if (result) return this.taken(def, input, record, result);
    // Not taken: what the look sent is paid for now, before its own task is scheduled, which gets as many attempts fewer.
    const evidence = (made.output as { evidence?: { ledger?: unknown } } | undefined)?.evidence;
    const ledger = ledgerSchema.safeParse(made.failed ?? evidence?.ledger);
    if (ledger.success) {
      absorb(record, ledger.data as unknown as AttemptSummary[]);
      this.pay(record, def.boundary);
      this.readAttempts.set(record.name, ledger.data.length);
    }
    return undefined;
  }

  /** A result another step's activity brought, recorded as the step's own call would have been. */
  private taken<A extends keyof Acts & string>(
    def: StepCall<A, InputOf<Acts, A>>,
    input: InputOf<Acts, A>,
    record: StepRecord,
    { evidence, ...output }: Evidenced<ResultOf<Acts, A>>,
  ): ResultOf<Acts, A> {
    begin(record, def, input);
    absorb(record, evidence.ledger, evidence);
    Object.assign(record, { status: 'completed', output, finishedAt: now() });
    return output as unknown as ResultOf<Acts, A>;
  }

  /**
   * The step's result as a send's receipt carried it, recorded and paid for as a call's; undefined when nothing was
   * carried (the step runs as its own task). Carried for another input, or not fitting its schema, the step fails as
   * unusable: what was written is the store's, and a person looks (running it again could not undo it).
   */
  private takeCarried<A extends keyof Acts & string>(
    def: StepCall<A, InputOf<Acts, A>>,
    input: InputOf<Acts, A>,
    record: StepRecord,
  ): ResultOf<Acts, A> | undefined {
    const brought = this.brought(this.carried, def, input, record);
    if (!brought) return undefined;
    if (brought.result) return this.taken(def, input, record, brought.result);
    begin(record, def, input);
    const error = unusable(
      `${record.name} was carried by an earlier send with another input, or a result the workflow cannot use`,
    );
    Object.assign(record, { status: 'failed', error, output: brought.made.output ?? null, finishedAt: now() });
    throw new StepFailedError(record.name, error);
  }

  /**
   * What an earlier send's activity brought for this step, taken once: with its result when it fits the step's
   * schema and was made with the input the saga gives the step.
   */
  private brought<A extends keyof Acts & string, M extends { input: unknown; output?: unknown }>(
    from: Map<string, M>,
    def: StepCall<A, InputOf<Acts, A>>,
    input: InputOf<Acts, A>,
    record: StepRecord,
  ): { made: M; result?: Evidenced<ResultOf<Acts, A>> } | undefined {
    const made = from.get(record.name);
    if (!made) return undefined;
    from.delete(record.name);
    const parsed = evidenced(def.output).safeParse(made.output);
    const fits = parsed.success && canonical(made.input) === canonical(input);
    return { made, ...(fits && { result: parsed.data as Evidenced<ResultOf<Acts, A>> }) };
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

/** A later read step and its input, for a send's activity to read once its effect is recorded. */
export interface ReadFirst<Step extends string> {
  step: StepCall<string, never> & { name: Step };
  input: unknown;
}

/** JSON with every object's keys in order: two inputs built apart compare by content. */
const canonical = (value: unknown) =>
  JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );

/** A step's record as its call begins: running, with what the table shows of its input and its key. */
function begin<In>(record: StepRecord, def: StepCall<string, In>, input: In): void {
  const shown = { input: def.shows ? def.shows(input) : input, idempotencyKey: def.key?.(input) };
  Object.assign(record, { status: 'running', ...shown, startedAt: now(), error: undefined, finishedAt: undefined });
}

/** An attempt of a call, as every later ledger of its key shows it again. */
function rowId(a: AttemptSummary): string {
  return `${a.startedAt}#${a.attempt}`;
}

/** Adds a run of attempts to the step's ledger (a step can be run again, e.g. a resubmission after reconciliation). */
function absorb(record: StepRecord, ledger: AttemptSummary[], evidence?: StepEvidence): void {
  const known = new Set(record.ledger.map(rowId));
  record.ledger = [...record.ledger, ...ledger.filter((a) => !known.has(rowId(a)))];
  Object.assign(record, tally({ attempt: evidence?.attempt ?? record.ledger.length, ledger: record.ledger }));
}
