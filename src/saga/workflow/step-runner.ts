// The per-step state table of a run, held in workflow state: each step's record and the moves of a record
// (running, completed, failed, skipped, awaiting the provider, a compensation run or held).
import type { CallStatus, CompensationRecord, StepRecord } from '../../contract';
import type { StepError } from './step-failure';

export const now = () => new Date().toISOString(); // deterministic inside a workflow

/** What came of a compensation (completed with its receipt, failed, or unknown), as its record keeps it. */
export type CompensationOutcome = { status: CallStatus } & Pick<
  CompensationRecord,
  'output' | 'error' | 'attempts' | 'transportRequests'
>;

const UNTRIED = { attempts: 0, transportRequests: 0 } as const;

/** The per-step state table of a run, held in workflow state: each step's record, and the moves of a record. */
export class StepRunner<Name extends string> {
  private readonly records: Map<Name, StepRecord>;
  /** Whether an undo waits for a receipt that is not final (undo.ts): asked once per run, when one first is not. */
  undoWaitsForFinal?: boolean;

  constructor(names: readonly Name[]) {
    this.records = new Map(names.map((name) => [name, { name, status: 'pending', ...UNTRIED, ledger: [] }]));
  }

  has(name: string): name is Name {
    return this.records.has(name as Name);
  }

  get(name: Name): StepRecord {
    const record = this.records.get(name);
    if (!record) throw new Error(`unknown step ${name}`);
    return record;
  }

  /** The table, unmasked: what leaves the run is masked where it leaves (the run's `view()`). */
  table(): StepRecord[] {
    return [...this.records.values()];
  }

  /** The saga's last step: where a run that completed, or ended past its steps, is shown. */
  get last(): Name {
    return [...this.records.keys()].at(-1)!;
  }

  completed(): Name[] {
    return [...this.records.values()].filter((r) => r.status === 'completed').map((r) => r.name as Name);
  }

  /** Runs a completed step's registered compensation under its own key and records what came of it. */
  async compensate(name: Name, key: string, run: () => Promise<CompensationOutcome>): Promise<void> {
    const compensation: CompensationRecord = {
      kind: 'compensation',
      key,
      status: 'running',
      startedAt: now(),
      ...UNTRIED,
    };
    this.get(name).compensation = compensation;
    Object.assign(compensation, await run(), { finishedAt: now() });
  }

  /** Marks a step failed (also after a check in workflow code, e.g. the order cannot take this refund). */
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
    this.get(name).compensation = { kind: 'compensation', key, status: 'held', note, ...UNTRIED };
    return true;
  }

  markNotCompensable(name: Name, note: string): void {
    this.get(name).compensation = { kind: 'forward_repair', status: 'not_compensable', note, ...UNTRIED };
  }
}
