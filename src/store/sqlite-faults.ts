// Faults in the store's own order writes, made real: a second connection to the same database
// file is the competing writer, or holds the write lock. Faults live in a table, so a test or a
// chaos run in another process can arm them; only a store opened with faults enabled reads it.
import Database from 'better-sqlite3';
import type { StoreFault, StoreFaultKind, StoreFaults } from './types';

export const FAULTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS store_faults (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('conflict', 'busy')),
  order_id TEXT,
  remaining INTEGER NOT NULL CHECK (remaining >= 0),
  hits INTEGER NOT NULL DEFAULT 0
) STRICT;
`;

interface FaultRow {
  id: number;
  kind: StoreFaultKind;
  order_id: string | null;
  remaining: number;
  hits: number;
}

const toFault = (r: FaultRow): StoreFault => ({ id: r.id, kind: r.kind, orderId: r.order_id, remaining: r.remaining, hits: r.hits });

export class SqliteStoreFaults implements StoreFaults {
  /** The other writer: its own connection, so that what it commits is a real concurrent write. */
  private other: Database.Database | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly filename: string,
    private readonly enabled: boolean,
  ) {
    if (enabled && filename === ':memory:') throw new Error('store faults need a database file: an in-memory database has no second connection');
  }

  async add(fault: { kind: StoreFaultKind; orderId?: string; count?: number }): Promise<StoreFault> {
    const count = fault.count ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > 1000) throw new Error(`a store fault's count must be 1-1000, got ${count}`);
    const { lastInsertRowid } = this.db
      .prepare('INSERT INTO store_faults (kind, order_id, remaining) VALUES (?, ?, ?)')
      .run(fault.kind, fault.orderId ?? null, count);
    return toFault(this.db.prepare<[number], FaultRow>('SELECT * FROM store_faults WHERE id = ?').get(Number(lastInsertRowid))!);
  }

  async list(): Promise<StoreFault[]> {
    return this.db.prepare<[], FaultRow>('SELECT * FROM store_faults ORDER BY id').all().map(toFault);
  }

  async clear(): Promise<void> {
    this.db.prepare('DELETE FROM store_faults').run();
  }

  /**
   * Called inside an order write's transaction, after the order was read and before it is written.
   * The fault is consumed by the other connection, so our transaction rolling back does not re-arm it.
   */
  beforeOrderWrite(orderId: string): void {
    if (!this.enabled) return;
    const other = (this.other ??= new Database(this.filename));
    const fault = other.transaction(() => {
      const row = other
        .prepare<[string], FaultRow>('SELECT * FROM store_faults WHERE remaining > 0 AND (order_id IS NULL OR order_id = ?) ORDER BY id LIMIT 1')
        .get(orderId);
      if (row) other.prepare('UPDATE store_faults SET remaining = remaining - 1, hits = hits + 1 WHERE id = ?').run(row.id);
      return row;
    }).immediate();
    if (!fault) return;
    if (fault.kind === 'conflict') {
      // Committed after our read: our conditional write now fails on the stale snapshot.
      other.prepare("UPDATE orders SET version = version + 1, updated_at = ? WHERE id = ?").run(new Date().toISOString(), orderId);
      return;
    }
    // Hold the write lock; our write waits out busy_timeout and fails. Released once our thread is free again.
    other.exec('BEGIN IMMEDIATE');
    setImmediate(() => other.exec('COMMIT'));
  }

  close(): void {
    this.other?.close();
  }
}
