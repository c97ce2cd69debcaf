// The per-step state table of a run: what each step was given, what it returned, when, how
// many attempts it took and how it failed. Held in workflow state and returned by a Query.
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import type { Attempted } from '../reliability/attempts';

export type StepStatus = 'pending' | 'running' | 'completed' | 'failed' | 'skipped';
export type CompensationStatus = 'running' | 'completed' | 'failed' | 'not_compensable';

export interface StepError {
  type: string;
  message: string;
  nonRetryable: boolean;
}

export interface CompensationRecord {
  kind: 'compensation' | 'forward_repair';
  key?: string;
  status: CompensationStatus;
  note?: string;
  output?: unknown;
  error?: StepError;
  startedAt?: string;
  finishedAt?: string;
  attempts: number;
}

export interface StepRecord {
  name: string;
  status: StepStatus;
  idempotencyKey?: string;
  input?: unknown;
  output?: unknown;
  startedAt?: string;
  finishedAt?: string;
  error?: StepError;
  attempts: number;
  compensation?: CompensationRecord;
}

/** Raised by the runner when a step has failed for good (its retry policy gave up). */
export class StepFailedError extends Error {
  constructor(
    readonly step: string,
    readonly cause: StepError,
  ) {
    super(`step ${step} failed: ${cause.type}: ${cause.message}`);
  }
}

const now = () => new Date().toISOString(); // deterministic inside a workflow

export class StepRunner<Name extends string> {
  private readonly records: Map<Name, StepRecord>;

  constructor(names: readonly Name[]) {
    this.records = new Map(names.map((name) => [name, { name, status: 'pending', attempts: 0 }]));
  }

  get(name: Name): StepRecord {
    const record = this.records.get(name);
    if (!record) throw new Error(`unknown step ${name}`);
    return record;
  }

  table(): StepRecord[] {
    return [...this.records.values()];
  }

  completed(): Name[] {
    return [...this.records.values()].filter((r) => r.status === 'completed').map((r) => r.name as Name);
  }

  /** Runs one step's activity; the activity's own retry policy is the only retry loop. */
  async run<T>(name: Name, input: unknown, idempotencyKey: string | undefined, call: () => Promise<T>): Promise<T> {
    const record = this.get(name);
    Object.assign(record, { status: 'running', input, idempotencyKey, startedAt: now(), error: undefined });
    try {
      const { value, attempt } = attempted<T>(await call());
      Object.assign(record, { status: 'completed', output: value, attempts: attempt, finishedAt: now() });
      return value;
    } catch (err) {
      const { error, attempts } = describeFailure(err);
      Object.assign(record, { status: 'failed', error, attempts, finishedAt: now() });
      throw new StepFailedError(name, error);
    }
  }

  /** Runs a completed step's registered compensation under its own key and records its receipt. */
  async compensate(name: Name, key: string, call: () => Promise<unknown>): Promise<boolean> {
    const compensation: CompensationRecord = { kind: 'compensation', key, status: 'running', startedAt: now(), attempts: 0 };
    this.get(name).compensation = compensation;
    try {
      const { value, attempt } = attempted(await call());
      Object.assign(compensation, { status: 'completed', output: value, attempts: attempt, finishedAt: now() });
      return true;
    } catch (err) {
      const { error, attempts } = describeFailure(err);
      Object.assign(compensation, { status: 'failed', error, attempts, finishedAt: now() });
      return false;
    }
  }

  /** Fails a completed step after a check in workflow code (e.g. the order cannot take this refund). */
  fail(name: Name, error: StepError): never {
    Object.assign(this.get(name), { status: 'failed', error, finishedAt: now() });
    throw new StepFailedError(name, error);
  }

  markNotCompensable(name: Name, note: string): void {
    this.get(name).compensation = { kind: 'forward_repair', status: 'not_compensable', note, attempts: 0 };
  }
}

/** Activity results arrive wrapped with their attempt number by the worker's AttemptsInterceptor. */
function attempted<T>(raw: unknown): Attempted<T> {
  if (typeof raw === 'object' && raw !== null && 'value' in raw && typeof (raw as Attempted<T>).attempt === 'number') {
    return raw as Attempted<T>;
  }
  throw new Error('activity result has no attempt number: build refund workers with createRefundWorker (it installs AttemptsInterceptor)');
}

function describeFailure(err: unknown): { error: StepError; attempts: number } {
  if (!(err instanceof ActivityFailure)) throw err; // a bug in workflow code: let the workflow task fail and retry
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) {
    const [info] = (cause.details ?? []) as [{ attempt?: number } | undefined];
    return {
      error: { type: cause.type ?? 'Error', message: cause.message, nonRetryable: cause.nonRetryable ?? false },
      attempts: info?.attempt ?? 0,
    };
  }
  if (cause instanceof TimeoutFailure) {
    return { error: { type: `TIMEOUT_${cause.timeoutType}`, message: cause.message, nonRetryable: false }, attempts: 0 };
  }
  return { error: { type: cause?.name ?? 'UNKNOWN', message: cause?.message ?? err.message, nonRetryable: false }, attempts: 0 };
}
