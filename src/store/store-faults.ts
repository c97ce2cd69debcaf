// Faults in the store's own order writes, made real: a second connection to the same database is
// the competing writer, or holds the lock our write needs. Faults live in a table, so a test or a
// chaos run in another process can arm them; only a store opened with faults enabled reads it.
import { sql } from 'kysely';
import type { Database, Queryable } from './database';
import { fromRow, type RowOf } from './rows';

/** conflict: a competing writer changes the order between our read and our write; busy: it holds the write lock. */
export type StoreFaultKind = 'conflict' | 'busy';

export interface StoreFault {
  id: number;
  kind: StoreFaultKind;
  /** Only writes to this order; null for any. */
  orderId: string | null;
  remaining: number;
  hits: number;
}

type FaultRow = RowOf<StoreFault>;

export class StoreFaults {
  /** The other writer: its own connection, so that what it commits is a real concurrent write. */
  private other: Promise<Database> | undefined;

  constructor(
    private readonly db: Database,
    private readonly openOther: (() => Promise<Database>) | undefined,
    /** How long our write waits for a lock before it fails: a busy fault holds the lock longer. */
    private readonly lockWaitMs: number,
  ) {}

  async add(fault: { kind: StoreFaultKind; orderId?: string; count?: number }): Promise<StoreFault> {
    const count = fault.count ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > 1000)
      throw new Error(`a store fault's count must be 1-1000, got ${count}`);
    const row = await this.db.one(
      sql<FaultRow>`INSERT INTO store_faults (kind, order_id, remaining) VALUES (${fault.kind}, ${fault.orderId ?? null}, ${count}) RETURNING *`,
    );
    return fromRow(row!);
  }

  async list(): Promise<StoreFault[]> {
    return (await this.db.all(sql<FaultRow>`SELECT * FROM store_faults ORDER BY id`)).map(fromRow);
  }

  async clear(): Promise<void> {
    await this.db.run(sql`DELETE FROM store_faults`);
  }

  /** Whether a fault waits for the order's next write (read in the caller's transaction `on`); never, without the seam. */
  async armedFor(orderId: string, on: Queryable): Promise<boolean> {
    if (!this.openOther) return false;
    const row = await on.one(
      sql`SELECT id FROM store_faults WHERE remaining > 0 AND (order_id IS NULL OR order_id = ${orderId}) LIMIT 1`,
    );
    return row !== undefined;
  }

  /**
   * Called inside an order write's transaction, after the order was read and before it is written.
   * The fault is consumed by the other connection, so our transaction rolling back does not re-arm it.
   */
  async beforeOrderWrite(orderId: string): Promise<void> {
    if (!this.openOther) return;
    const other = await (this.other ??= this.openOther());
    const fault = await other.transaction(async (tx) => {
      const row = await tx.one(
        sql<FaultRow>`SELECT * FROM store_faults WHERE remaining > 0 AND (order_id IS NULL OR order_id = ${orderId}) ORDER BY id LIMIT 1`,
      );
      if (row)
        await tx.run(sql`UPDATE store_faults SET remaining = remaining - 1, hits = hits + 1 WHERE id = ${row.id}`);
      return row;
    });
    if (!fault) return;
    if (fault.kind === 'conflict') {
      // Committed after our read: our conditional write now fails on the stale snapshot.
      await other.run(
        sql`UPDATE orders SET version = version + 1, updated_at = ${new Date().toISOString()} WHERE id = ${orderId}`,
      );
      return;
    }
    // Hold the order's lock until our write has waited it out and failed, then let go. A lock the other connection
    // could not take is no fault: our write goes on.
    await new Promise<void>((locked) => {
      other
        .transaction(async (tx) => {
          // SQLite's BEGIN IMMEDIATE already holds the database's write lock; PostgreSQL locks the row.
          if (tx.dialect === 'postgres') await tx.all(sql`SELECT id FROM orders WHERE id = ${orderId} FOR UPDATE`);
          locked();
          await new Promise((resolve) => setTimeout(resolve, this.lockWaitMs + 500));
        })
        .catch(() => locked());
    });
  }

  async close(): Promise<void> {
    const other = await this.other?.catch(() => undefined);
    await other?.close();
  }
}
