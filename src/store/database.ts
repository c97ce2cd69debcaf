// One SQL layer over SQLite and PostgreSQL: the store's queries are Kysely `sql` templates, written once, and
// transactions are serializable on both (one aborted for a concurrent one runs again: serialization.ts).
import { AsyncLocalStorage } from 'node:async_hooks';
import BetterSqlite3 from 'better-sqlite3';
import {
  Kysely,
  PostgresDialect,
  SqliteDialect,
  sql,
  type LogEvent,
  type QueryResult,
  type RawBuilder,
  type SqliteDatabase,
} from 'kysely';
import pg from 'pg';
import { redactUrl } from '../reliability/redaction';
import { runSerializable, serializationFailure, type MovedSince } from './serialization';

export type Dialect = 'sqlite' | 'postgres';

/** What the store sends, counted where it is sent (the worker's metrics, the bench): each statement by kind, each commit. */
export interface StoreObserver {
  statement(kind: StatementKind): void;
  /** A transaction committed, or a write ran outside one (its own commit, synced alike). */
  commit(): void;
  /** A transaction the database aborted for a concurrent one runs again (its rows had not moved). */
  serializationRetry?(): void;
}

const STATEMENT_KINDS = ['select', 'insert', 'update', 'delete', 'begin', 'commit', 'rollback'] as const;
export type StatementKind = (typeof STATEMENT_KINDS)[number] | 'other';

/** A statement's kind, by its first keyword. */
export function statementKind(text: string): StatementKind {
  const word = /^\s*([a-z]+)/i.exec(text)?.[1]?.toLowerCase();
  return (STATEMENT_KINDS as readonly string[]).includes(word ?? '') ? (word as StatementKind) : 'other';
}

const WRITES: ReadonlySet<StatementKind> = new Set(['insert', 'update', 'delete']);

/** A query's kind from its text as written, without compiling it again unless it begins with an interpolation. */
export function kindOf(query: RawBuilder<unknown>, kysely: Kysely<unknown>): StatementKind {
  const written = query.toOperationNode().sqlFragments[0] ?? '';
  return statementKind(written.trim() ? written : query.compile(kysely).sql);
}

/** Kysely's log hook, counting each statement a connection executes (BEGIN and COMMIT too); none without an observer. */
const counting = (observer: StoreObserver | undefined) =>
  observer && ((event: LogEvent) => observer.statement(statementKind(event.query.sql)));

// Writes that ride in the next transaction a caller commits rather than committing on their own: a step's
// attempt-ledger row goes in the step's own transactions, each commit synced once, not twice.

/** What a rider wrote in a transaction, told how the transaction ended. */
export interface RiderWrite {
  committed(): void;
  /** inDoubt: the COMMIT got no answer that says it failed, so it may have taken effect. */
  rolledBack(inDoubt: boolean): void;
}

/** Called inside the transaction, after the caller's own statements and before COMMIT; undefined when it wrote nothing. */
type Rider = (tx: Queryable) => Promise<RiderWrite | undefined>;

const riders = new AsyncLocalStorage<Rider>();

/** Runs `fn` with `rider` carried by every transaction it commits, however deep in its async calls. */
export function withRider<T>(rider: Rider, fn: () => Promise<T>): Promise<T> {
  return riders.run(rider, fn);
}

/** A place queries run: the database itself, or one transaction on it. */
export type Queryable = Pick<Runner, 'dialect' | 'one' | 'all' | 'run'>;

class Runner {
  constructor(
    readonly dialect: Dialect,
    private readonly on: Kysely<unknown>,
  ) {}

  async one<T>(query: RawBuilder<T>): Promise<T | undefined> {
    return (await this.execute(query)).rows[0];
  }

  async all<T>(query: RawBuilder<T>): Promise<T[]> {
    return (await this.execute(query)).rows;
  }

  /** Runs a write; returns how many rows it changed. */
  async run(query: RawBuilder<unknown>): Promise<number> {
    return Number((await this.execute(query)).numAffectedRows ?? 0n);
  }

  protected execute<T>(query: RawBuilder<T>): Promise<QueryResult<T>> {
    return query.execute(this.on);
  }
}

/** Runs one caller at a time, in order. */
class Lock {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

// SQLite waits for a write lock by blocking the thread: two connections of one process to one file would wait
// on each other for good, so they take turns through one lock per file.
const fileLocks = new Map<string, Lock>();

export class Database extends Runner {
  private closed = false;

  constructor(
    dialect: Dialect,
    readonly kysely: Kysely<unknown>,
    private readonly lock?: Lock,
    private readonly observer?: StoreObserver,
  ) {
    super(dialect, kysely);
  }

  /** A write outside a transaction (an INSERT … RETURNING read with `one` among them) is a commit of its own. */
  protected override async execute<T>(query: RawBuilder<T>): Promise<QueryResult<T>> {
    const result = await this.turn(() => super.execute(query));
    if (this.observer && WRITES.has(kindOf(query, this.kysely))) this.observer.commit();
    return result;
  }

  /**
   * `fn` in a transaction, run again after a serialization failure. `optimistic`: the caller reads before writing
   * (SQLite: BEGIN DEFERRED), and `moved` says whether what it read moved (thrown) or stands (run again); without it
   * SQLite locks at BEGIN IMMEDIATE and always reruns.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, optimistic?: { moved: MovedSince }): Promise<T> {
    return runSerializable(() => this.turn(() => this.once(fn, optimistic !== undefined)), {
      moved: optimistic?.moved,
      retrying: () => this.observer?.serializationRetry?.(),
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.kysely.destroy();
  }

  /** SQLite: `fn` in one BEGIN IMMEDIATE transaction, in turn with this process's other users of the file (the migrator). */
  exclusively<T>(fn: (connection: Kysely<unknown>) => Promise<T>): Promise<T> {
    return this.turn(() => this.atomically('BEGIN IMMEDIATE', fn));
  }

  private turn<T>(fn: () => Promise<T>): Promise<T> {
    return this.lock ? this.lock.run(fn) : fn();
  }

  /** One try of a transaction, its rider's write in it. */
  private async once<T>(fn: (tx: Queryable) => Promise<T>, optimistic: boolean): Promise<T> {
    const begin =
      this.dialect === 'postgres'
        ? 'BEGIN ISOLATION LEVEL SERIALIZABLE'
        : optimistic
          ? 'BEGIN DEFERRED'
          : 'BEGIN IMMEDIATE';
    const rider = riders.getStore();
    let rode: RiderWrite | undefined;
    try {
      const result = await this.atomically(begin, async (connection) => {
        const runner = new Runner(this.dialect, connection);
        // A transaction opened inside this one (another connection's: a store fault's competing writer) carries
        // nothing, or it would commit the rider's rows apart from the transaction they ride in.
        const result = await riders.exit(() => fn(runner));
        rode = await rider?.(runner);
        return result;
      });
      rode?.committed();
      this.observer?.commit();
      return result;
    } catch (err) {
      // Only COMMIT can fail once the rider wrote: refused for serialization, it certainly did not commit.
      rode?.rolledBack(!serializationFailure(err));
      throw err;
    }
  }

  /** `fn` from `begin` to COMMIT, or ROLLBACK, on one connection: the SQLite driver lends its only one to one caller at a time. */
  private atomically<T>(begin: string, fn: (connection: Kysely<unknown>) => Promise<T>): Promise<T> {
    return this.kysely.connection().execute(async (connection) => {
      await sql.raw(begin).execute(connection);
      try {
        const result = await fn(connection);
        await sql.raw('COMMIT').execute(connection);
        return result;
      } catch (err) {
        await sql
          .raw('ROLLBACK')
          .execute(connection)
          .catch(() => undefined);
        throw err;
      }
    });
  }
}

export function openSqlite(
  filename: string,
  options: {
    busyTimeoutMs?: number;
    /** Take no turns with this process's other connections to the file, as another process's would (tests, faults). */
    asAnotherProcess?: boolean;
    observer?: StoreObserver;
  } = {},
): Database {
  const db = new BetterSqlite3(filename);
  db.pragma('journal_mode = WAL');
  // A commit (an intent, a send's stamp) must survive a power cut, or a retry would send again; better-sqlite3's
  // SQLite otherwise syncs a WAL only at checkpoints (NORMAL).
  db.pragma('synchronous = FULL');
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  db.pragma('foreign_keys = ON');
  const kysely = new Kysely<unknown>({
    dialect: new SqliteDialect({ database: preparedOnce(db) }),
    log: counting(options.observer),
  });
  const shared = filename !== ':memory:' && !options.asAnotherProcess;
  if (shared && !fileLocks.has(filename)) fileLocks.set(filename, new Lock());
  return new Database('sqlite', kysely, shared ? fileLocks.get(filename) : undefined, options.observer);
}

/** Statements kept per connection at most; past it they are prepared afresh. */
const MAX_STATEMENTS = 500;

/**
 * Each statement prepared once per SQL text (Kysely asks at every query, and preparing was most of a query's time);
 * safe, as a statement always runs to completion before the next.
 */
function preparedOnce(db: BetterSqlite3.Database): SqliteDatabase {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => db.close(),
    prepare(text: string) {
      let statement = statements.get(text);
      if (!statement) {
        if (statements.size >= MAX_STATEMENTS) statements.clear();
        statements.set(text, (statement = db.prepare(text)));
      }
      return statement;
    },
  };
}

/** How long opening a connection may take before the store gives up on the server. */
const CONNECT_TIMEOUT_MS = 5000;

// BIGINT (int8) and COUNT(*) come back as strings from pg; every number this store keeps is a safe integer.
const pgTypes = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as 'text'),
};

/** Opens a pool on a PostgreSQL server and proves it answers, so that a wrong URL fails now, with a clear message. */
export async function openPostgres(
  url: string,
  /** lockTimeoutMs: how long a write waits for another transaction's row lock before failing (55P03). */
  options: { poolSize?: number; lockTimeoutMs?: number; observer?: StoreObserver } = {},
): Promise<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    types: pgTypes,
    // Nothing waits for ever (a lock, a statement, an abandoned transaction, a vanished peer). enable_seqscan=off:
    // keyed reads use an index, where a small table's scan makes SERIALIZABLE lock it whole (aborting its writers).
    options: [
      `-c lock_timeout=${options.lockTimeoutMs ?? 5000}`,
      '-c statement_timeout=30000 -c idle_in_transaction_session_timeout=60000',
      '-c enable_seqscan=off',
    ].join(' '),
    query_timeout: 35_000,
    keepAlive: true,
  });
  // An idle connection the server dropped is replaced on next use; without a listener it would crash the process.
  pool.on('error', () => undefined);
  try {
    const client = await pool.connect();
    client.release();
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(
      `cannot reach PostgreSQL at ${redactUrl(url)} within ${CONNECT_TIMEOUT_MS} ms: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const kysely = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }), log: counting(options.observer) });
  return new Database('postgres', kysely, undefined, options.observer);
}
