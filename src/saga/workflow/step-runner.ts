// The per-step state table of a run: what each step was given, what it returned, when, how many
// attempts and provider requests it took, and how it failed. Held in workflow state and returned
// by a Query. Every result is checked against its schema before the saga may use it.
import type { z } from 'zod';
import { tally, type AttemptSummary, type StepEvidence } from '../../reliability/attempt-ledger';
import { redact } from '../../reliability/redaction';
import type { Boundary } from '../../reliability/taxonomy';
import type { CompensationRecord, StepError, StepRecord } from '../../contract';
import { describeFailure, stepError, StepFailedError } from './step-failure';
import { zodProblems } from '../../domain/zod-problems';

const now = () => new Date().toISOString(); // deterministic inside a workflow

type WithEvidence = { evidence: StepEvidence };

/** What came of a compensation: completed with its receipt, failed, or unknown. */
export interface CompensationOutcome {
  status: 'completed' | 'failed' | 'unknown';
  output?: unknown;
  error?: StepError;
  attempts: number;
  transportRequests: number;
}

export class StepRunner<Name extends string> {
  private readonly records: Map<Name, StepRecord>;

  constructor(names: readonly Name[]) {
    this.records = new Map(
      names.map((name) => [name, { name, status: 'pending', attempts: 0, transportRequests: 0, ledger: [] }]),
    );
  }

  has(name: string): name is Name {
    return this.records.has(name as Name);
  }

  get(name: Name): StepRecord {
    const record = this.records.get(name);
    if (!record) throw new Error(`unknown step ${name}`);
    return record;
  }

  /** The table as operators see it: customer addresses masked. */
  table(): StepRecord[] {
    return redact([...this.records.values()]);
  }

  /** The saga's last step: where a run that completed, or ended past its steps, is shown. */
  get last(): Name {
    return [...this.records.keys()].at(-1)!;
  }

  completed(): Name[] {
    return [...this.records.values()].filter((r) => r.status === 'completed').map((r) => r.name as Name);
  }

  /**
   * Runs one step's activity (its own retry policy is the only retry loop), checks the result
   * against `schema`, and records it. `boundary` names the dependency, for classifying a failure
   * that carries none of our details (a Temporal timeout).
   */
  async run<T>(
    name: Name,
    input: unknown,
    idempotencyKey: string | undefined,
    boundary: Boundary,
    schema: z.ZodType,
    call: () => Promise<T & { evidence: StepEvidence }>,
    sends: boolean,
  ): Promise<T> {
    const record = this.get(name);
    Object.assign(record, {
      status: 'running',
      input,
      idempotencyKey,
      startedAt: now(),
      error: undefined,
      finishedAt: undefined,
    });
    let raw: unknown;
    try {
      raw = await call();
    } catch (err) {
      const { error, ledger } = describeFailure(err, boundary, name, sends);
      this.absorb(record, ledger);
      Object.assign(record, { status: 'failed', error, finishedAt: now() });
      throw new StepFailedError(name, error);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      // The activity finished, so whatever it did happened; what it returned cannot be used.
      const problems = zodProblems(parsed.error, '(result)');
      const error = stepError(
        'POISON',
        'undeterminable',
        'result_unusable',
        `${name} returned a result the workflow cannot use (${problems})`,
      );
      Object.assign(record, { status: 'failed', error, output: raw === undefined ? null : raw, finishedAt: now() });
      throw new StepFailedError(name, error);
    }
    const { evidence, ...output } = parsed.data as WithEvidence;
    this.absorb(record, evidence?.ledger ?? [], evidence);
    Object.assign(record, { status: 'completed', output, finishedAt: now() });
    return output as T;
  }

  /** Runs a completed step's registered compensation under its own key and records what came of it. */
  async compensate(name: Name, key: string, run: () => Promise<CompensationOutcome>): Promise<void> {
    const compensation: CompensationRecord = {
      kind: 'compensation',
      key,
      status: 'running',
      startedAt: now(),
      attempts: 0,
      transportRequests: 0,
    };
    this.get(name).compensation = compensation;
    Object.assign(compensation, await run(), { finishedAt: now() });
  }

  /** Marks a step failed after a check in workflow code (e.g. the order cannot take this refund). */
  fail(name: Name, error: StepError): void {
    Object.assign(this.get(name), { status: 'failed', error, finishedAt: now() });
  }

  /** Completes a failed step with an output established another way (reconciliation with the provider). */
  resolve(name: Name, output: unknown, note: string): void {
    Object.assign(this.get(name), { status: 'completed', output, note, error: undefined, finishedAt: now() });
  }

  skip(name: Name, note: string): void {
    Object.assign(this.get(name), { status: 'skipped', note, finishedAt: now() });
  }

  /** The step ran and waits for the provider; the next check completes it or fails it. */
  await(name: Name, note: string): void {
    Object.assign(this.get(name), { status: 'awaiting_provider', note });
  }

  note(name: Name, note: string): void {
    this.get(name).note = note;
  }

  /** A compensation the plan did not run, with why: it waits for a person's decision. One that already ran keeps its record; false then. */
  hold(name: Name, key: string, note: string): boolean {
    const previous = this.get(name).compensation;
    if (previous?.kind === 'compensation' && previous.status !== 'held') return false;
    this.get(name).compensation = {
      kind: 'compensation',
      key,
      status: 'held',
      note,
      attempts: 0,
      transportRequests: 0,
    };
    return true;
  }

  markNotCompensable(name: Name, note: string): void {
    this.get(name).compensation = {
      kind: 'forward_repair',
      status: 'not_compensable',
      note,
      attempts: 0,
      transportRequests: 0,
    };
  }

  /** Adds a run of attempts to the step's ledger (a step can be run again, e.g. a resubmission after reconciliation). */
  private absorb(record: StepRecord, ledger: AttemptSummary[], evidence?: StepEvidence): void {
    const known = new Set(record.ledger.map((a) => `${a.attempt}@${a.startedAt}`));
    record.ledger = [...record.ledger, ...ledger.filter((a) => !known.has(`${a.attempt}@${a.startedAt}`))];
    const { attempts, transportRequests } = tally({
      attempt: evidence?.attempt ?? record.ledger.length,
      ledger: record.ledger,
    });
    Object.assign(record, { attempts, transportRequests });
  }
}
