// The attempt ledger's rows, one per attempt of a step, written where they cost no commit of their own (OpenAttempt).
import { AsyncLocalStorage } from 'node:async_hooks';
import { isDeepStrictEqual } from 'node:util';
import { sql } from 'kysely';
import { withRider, type Database, type Queryable, type RiderWrite } from './database';
import { AttemptEndedError } from './errors';
import type { AttemptSummary } from '../reliability/attempt-ledger';
import type { AttemptEnd, NewAttempt } from './types';

// Whether the step has other rows in this run, read by the write itself (PostgreSQL: rows committed before it;
// SQLite sees its own row too, hence the id): most steps have none, and their ledger is known without a read.
const OTHERS = sql`(SELECT COUNT(*) FROM attempts others WHERE others.key = attempts.key AND others.run_id = attempts.run_id AND others.id <> attempts.id) AS others`;
// Not counted inside a PostgreSQL transaction: SERIALIZABLE locks the index page the count reads, where concurrent
// runs insert their own rows, and aborts them for it. `alone` is then false: the ledger is read back after the commit.
const UNCOUNTED = sql`NULL AS others`;
const alone = (others: number | null) => others !== null && Number(others) === 0;

/** Two rows' writes in one transaction, committed or rolled back together. */
function both(a: RiderWrite | undefined, b: RiderWrite | undefined): RiderWrite | undefined {
  if (!a || !b) return a ?? b;
  return {
    committed: () => (a.committed(), b.committed()),
    rolledBack: (inDoubt) => (a.rolledBack(inDoubt), b.rolledBack(inDoubt)),
  };
}

/** Writes a row that has begun; with `end`, one that has ended as well. */
async function insertAttempt(
  on: Queryable,
  a: NewAttempt,
  startedAt: string,
  end?: AttemptEnd & { finishedAt: string },
  count = true,
): Promise<{ id: number; alone: boolean }> {
  const row = await on.one(sql<{ id: number; others: number | null }>`
    INSERT INTO attempts (key, step, operation_id, workflow_id, run_id, attempt, started_at,
      finished_at, transport_requests, outcome, certainty, reason, retry_after_ms, next_delay_ms, provider_request_id)
    VALUES (${a.key}, ${a.step}, ${a.operationId}, ${a.workflowId}, ${a.runId}, ${a.attempt}, ${startedAt},
      ${end?.finishedAt ?? null}, ${end?.transportRequests ?? 0}, ${end?.outcome ?? null}, ${end?.certainty ?? null}, ${end?.reason ?? null},
      ${end?.retryAfterMs ?? null}, ${end?.nextDelayMs ?? null}, ${end?.providerRequestId ?? null})
    RETURNING id, ${count ? OTHERS : UNCOUNTED}`);
  return { id: Number(row!.id), alone: alone(row!.others) };
}

/** Records how the attempt ended; undefined when there is no such row. */
async function finishAttempt(
  on: Queryable,
  id: number,
  end: AttemptEnd,
  finishedAt: string,
  count = true,
): Promise<FinishedAttempt | undefined> {
  const row = await on.one(sql<{ others: number | null }>`
    UPDATE attempts SET finished_at = ${finishedAt}, transport_requests = ${end.transportRequests}, outcome = ${end.outcome}, certainty = ${end.certainty},
      reason = ${end.reason}, retry_after_ms = ${end.retryAfterMs}, next_delay_ms = ${end.nextDelayMs}, provider_request_id = ${end.providerRequestId}
    WHERE id = ${id}
    RETURNING ${count ? OTHERS : UNCOUNTED}`);
  return row && { finishedAt, alone: alone(row.others) };
}

/** The row of an attempt whose write rode in another step's transaction `tx`: begun and ended in it, as it says. */
export async function carriedAttempt(
  tx: Queryable,
  a: NewAttempt,
  end: AttemptEnd,
  at: string,
): Promise<AttemptSummary> {
  await insertAttempt(tx, a, at, { ...end, finishedAt: at }, false);
  return { attempt: a.attempt, startedAt: at, finishedAt: at, ...end };
}

/** A row that begins in whichever transaction records the effect of the attempt it runs beside (`alongside`). */
const companions = new AsyncLocalStorage<(tx: Queryable) => Promise<RiderWrite | undefined>>();

/** A ledger row's end as written; `alone`: no other row under its key and run, so the step's ledger is this attempt. */
type FinishedAttempt = { finishedAt: string; alone: boolean };

/**
 * An attempt's ledger row: rides in the first transaction `run` commits, and its end in the one that records the
 * step's effect; before any provider request it is on disk (`begun()`), so an attempt that never finishes is seen.
 */
export class OpenAttempt {
  startedAt: string;
  private id: number | undefined;
  /** A write of the row is on its way (in a transaction, or alone): others wait for it. */
  private writing: Promise<void> | undefined;
  /** The end a transaction wrote with its effect, as written. */
  private ended: { end: AttemptEnd; finished: FinishedAttempt } | undefined;
  /** A transaction that carried the row failed at its COMMIT with no answer that it did not take effect: look first. */
  private doubtful = false;
  /** finish() was called: nothing more goes out under this attempt. */
  private closed = false;

  constructor(
    private readonly db: Database,
    private readonly attempt: NewAttempt,
    private readonly now: () => string,
  ) {
    this.startedAt = now();
  }

  run<T>(fn: () => Promise<T>): Promise<T> {
    return withRider((tx) => this.ride(tx), fn);
  }

  /**
   * Runs the store call that records the attempt's effect; its transaction writes the attempt's end as `end()` says,
   * and begins the row of an attempt this one runs beside (`alongside`).
   */
  recording<T>(end: () => AttemptEnd, fn: () => Promise<T>): Promise<T> {
    const companion = companions.getStore();
    if (!companion) return withRider((tx) => this.ride(tx, end), fn);
    return withRider(async (tx) => {
      const mine = await this.ride(tx, end);
      try {
        return both(mine, await companion(tx));
      } catch (err) {
        // The transaction fails without committing: this row's write is undone with it (its claim released).
        mine?.rolledBack(false);
        throw err;
      }
    }, fn);
  }

  /**
   * Runs `fn` (another step's attempt) with this row beginning in the transaction that records that attempt's effect:
   * on disk before this attempt's first request, and no commit of its own. Begun there, it starts then.
   */
  alongside<T>(fn: () => Promise<T>): Promise<T> {
    return companions.run(async (tx) => {
      if (this.id === undefined && !this.writing && !this.doubtful && !this.closed) this.startedAt = this.now();
      return this.ride(tx);
    }, fn);
  }

  /** Whether the row may be on disk: written, or in a transaction whose commit went unanswered. */
  get mayBeWritten(): boolean {
    return this.id !== undefined || this.doubtful;
  }

  /** The row is on disk once this resolves: its id, and its start as written. */
  async begun(): Promise<{ id: number; startedAt: string }> {
    while (this.writing) await this.writing;
    if (this.closed)
      throw new AttemptEndedError(
        `attempt ${this.attempt.attempt} of ${this.attempt.key} has ended: nothing more is sent under it`,
      );
    if (this.id === undefined) {
      const done = this.claim();
      try {
        this.id = (await this.found()) ?? (await insertAttempt(this.db, this.attempt, this.startedAt)).id;
      } finally {
        done();
      }
    }
    return { id: this.id, startedAt: this.startedAt };
  }

  /** Writes the attempt's end, unless a transaction already wrote this very end; undefined when the row is gone. */
  async finish(end: AttemptEnd): Promise<FinishedAttempt | undefined> {
    while (this.writing) await this.writing;
    this.closed = true;
    if (this.ended && isDeepStrictEqual(this.ended.end, end)) return this.ended.finished;
    const done = this.claim();
    try {
      const finishedAt = this.now();
      this.id ??= await this.found();
      if (this.id !== undefined) return await finishAttempt(this.db, this.id, end, finishedAt);
      const { id, alone } = await insertAttempt(this.db, this.attempt, this.startedAt, { ...end, finishedAt });
      this.id = id;
      return { finishedAt, alone };
    } finally {
      done();
    }
  }

  /** In a transaction the attempt commits: the row's beginning if none is written, and with `end` its end. */
  private async ride(tx: Queryable, end?: () => AttemptEnd): Promise<RiderWrite | undefined> {
    // A write is on its way elsewhere, the attempt has ended, or the row's existence is in doubt: this transaction
    // carries nothing, and begun() or finish() write what is left.
    if (this.writing || this.closed || (this.id === undefined && this.doubtful)) return undefined;
    const ending = end?.();
    const finishedAt = this.now();
    const count = tx.dialect !== 'postgres'; // see UNCOUNTED
    if (this.id !== undefined) {
      if (!ending) return undefined;
      const finished = await finishAttempt(tx, this.id, ending, finishedAt, count);
      return {
        committed: () => {
          if (finished) this.ended = { end: ending, finished };
        },
        rolledBack: () => undefined,
      };
    }
    const done = this.claim();
    try {
      const row = await insertAttempt(tx, this.attempt, this.startedAt, ending && { ...ending, finishedAt }, count);
      return {
        committed: () => {
          this.id = row.id;
          if (ending) this.ended = { end: ending, finished: { finishedAt, alone: row.alone } };
          done();
        },
        // Refused for serialization, the transaction is certainly undone: its retry carries the row again.
        rolledBack: (inDoubt) => {
          if (inDoubt) this.doubtful = true;
          done();
        },
      };
    } catch (err) {
      done();
      throw err;
    }
  }

  /** The row a transaction whose COMMIT failed may have written after all: found by what only this attempt writes. */
  private async found(): Promise<number | undefined> {
    if (!this.doubtful) return undefined;
    const a = this.attempt;
    const row = await this.db.one(sql<{ id: number }>`
      SELECT id FROM attempts WHERE key = ${a.key} AND run_id = ${a.runId} AND attempt = ${a.attempt} AND started_at = ${this.startedAt}
      ORDER BY id LIMIT 1`);
    this.doubtful = false;
    return row && Number(row.id);
  }

  /** Marks the row as being written; the returned function ends that. */
  private claim(): () => void {
    let release!: () => void;
    this.writing = new Promise((resolve) => (release = resolve));
    return () => {
      this.writing = undefined;
      release();
    };
  }
}
