// The checkout saga's store on SQLite and PostgreSQL: a reservation takes a cart's items off the
// stock once per key, all or nothing; its release puts them back once; the outbox takes the
// checkout's receipts; and migration 005 keeps every outbox row a 1.0 store holds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { openStore, OutOfStockError, type OrderStore } from '../../src/store';
import { openPostgres, openSqlite } from '../../src/store/database';
import { migrate } from '../../src/store/migrations';
import { DIALECTS, freshDatabase } from '../helpers/databases';
import { seedCart, setStock, stockLeft } from '../../tools/src/shop/carts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'checkout-store-'));
const cart = (
  id: string,
  items = [
    { sku: `${id}-a`, quantity: 2 },
    { sku: `${id}-b`, quantity: 1 },
  ],
) => ({
  id,
  customerEmail: 'buyer@example.com',
  currency: 'usd',
  amount: 4200,
  items,
});

describe.each(DIALECTS)('on %s', (dialect) => {
  let store: OrderStore;
  beforeAll(async () => {
    store = await openStore(await freshDatabase(dialect, dir));
  });
  afterAll(() => store?.close());

  it('reserves a cart once per key and releases it once per compensation key', async () => {
    const c = store.checkouts;
    await setStock(store, 'r1-a', 5);
    await setStock(store, 'r1-b', 1);
    await seedCart(store, cart('r1'));
    await expect(c.reserve('r1', 'k:reserve')).resolves.toEqual({
      cartId: 'r1',
      amount: 4200,
      currency: 'usd',
      changed: true,
    });
    await expect(c.reserve('r1', 'k:reserve')).resolves.toMatchObject({ changed: false });
    expect([await stockLeft(store, 'r1-a'), await stockLeft(store, 'r1-b')]).toEqual([3, 0]);
    await expect(c.reserve('r1', 'other')).rejects.toThrow('cart r1 was reserved under k:reserve, not other');

    await expect(c.release('r1', 'k:reserve:undo')).resolves.toMatchObject({ changed: true });
    await expect(c.release('r1', 'k:reserve:undo')).resolves.toMatchObject({ changed: false });
    expect([await stockLeft(store, 'r1-a'), await stockLeft(store, 'r1-b')]).toEqual([5, 1]);
    await expect(c.cart('r1')).resolves.toMatchObject({ reservedByKey: 'k:reserve', releasedByKey: 'k:reserve:undo' });
    // Released, its checkout is over: the same key again reserves nothing (a second checkout of the cart replayed it).
    await expect(c.reserve('r1', 'k:reserve')).rejects.toThrow(
      'cart r1 was released by k:reserve:undo: its checkout is over',
    );
    expect([await stockLeft(store, 'r1-a'), await stockLeft(store, 'r1-b')]).toEqual([5, 1]);
  });

  it('reserves nothing when one item is short, and releases nothing it never reserved', async () => {
    const c = store.checkouts;
    await setStock(store, 'r2-a', 5);
    await setStock(store, 'r2-b', 0);
    await seedCart(store, cart('r2'));
    const short = c.reserve('r2', 'k2');
    await expect(short).rejects.toThrow(OutOfStockError);
    await expect(short).rejects.toThrow('not enough r2-b left for 1; nothing was reserved');
    expect(await stockLeft(store, 'r2-a')).toBe(5);
    // A release before any reservation puts nothing back, and closes the cart: a reservation still in flight is refused.
    await expect(c.release('r2', 'k2:undo')).resolves.toMatchObject({ changed: false });
    expect(await stockLeft(store, 'r2-a')).toBe(5);
    await setStock(store, 'r2-b', 5);
    await expect(c.reserve('r2', 'k2')).rejects.toThrow('cart r2 was released by k2:undo: its checkout is over');
    expect([await stockLeft(store, 'r2-a'), await stockLeft(store, 'r2-b')]).toEqual([5, 5]);
    await expect(c.reserve('missing', 'k')).rejects.toThrow('cart missing does not exist');
  });

  it('keeps a cart as first seeded', async () => {
    await seedCart(store, cart('r3'));
    await expect(seedCart(store, cart('r3'))).resolves.toMatchObject({ id: 'r3', amount: 4200 });
    await expect(seedCart(store, { ...cart('r3'), amount: 1 })).rejects.toThrow(
      'cart r3 already exists with other contents (amount: stored 4200, got 1)',
    );
  });

  it('keeps a send record by key: requests, the latest off-the-wire bound, proof of absence, the first receipt', async () => {
    const { sends } = store;
    await expect(sends.get('s1', 'op1')).resolves.toMatchObject({ requestsSent: 0, lastSentAt: null, receipt: null });
    const first = await sends.stamp('s1', 'op1', 'test', 60_000);
    const second = await sends.stamp('s1', 'op1', 'test', 1_000);
    expect(second).toMatchObject({ requestsSent: 2, firstSentAt: first.firstSentAt, offTheWireBy: first.offTheWireBy });
    // Proof counted for one request is stale once a second went out; for both, it holds.
    await expect(sends.provenAbsent('s1', 1, 'test', 'not found')).resolves.toBe(false);
    await expect(sends.provenAbsent('s1', 2, 'test', 'not found')).resolves.toBe(true);
    await sends.settle('s1', { id: 'pi_1' }, 'test');
    await sends.settle('s1', { id: 'pi_2' }, 'test');
    await expect(sends.get('s1', 'op1')).resolves.toMatchObject({ provenAbsentThrough: 2, receipt: { id: 'pi_1' } });
    await expect(sends.provenAbsent('s1', 2, 'test', 'late')).resolves.toBe(false);
    const trail = (await store.operations.auditTrail('op1')).map((e) => e.event);
    expect(trail).toEqual(['request_sent', 'request_sent', 'proven_absent', 'receipt_recorded', 'receipt_recorded']);
  });

  it("migration 005 keeps the outbox's rows and takes the checkout's kinds", async () => {
    const url = await freshDatabase(dialect, dir);
    const db = dialect === 'postgres' ? await openPostgres(url) : openSqlite(new URL(url).pathname);
    try {
      await migrate(db, '004_sending_until');
      await sql`INSERT INTO notification_outbox (key, order_id, kind, recipient, subject, message_id, status, attempts, created_at, sending_since, sending_until, sending_until_of)
        VALUES ('n1', 'o1', 'refund_notice', 'a@example.com', 'Your refund', '<m1@x>', 'sending', 1, 'then', 'since', 'until', 'since')`.execute(
        db.kysely,
      );
      await expect(
        sql`INSERT INTO notification_outbox (key, order_id, kind, recipient, subject, message_id, status, attempts, created_at)
          VALUES ('n2', 'c1', 'checkout_receipt', 'a@example.com', 'Receipt', '<m2@x>', 'pending', 0, 'now')`.execute(
          db.kysely,
        ),
      ).rejects.toThrow(/CHECK|check constraint/);
    } finally {
      await db.close();
    }
    const migrated = await openStore(url);
    try {
      await expect(migrated.getNotification('n1')).resolves.toMatchObject({
        kind: 'refund_notice',
        status: 'sending',
        messageId: '<m1@x>',
        sendingSince: 'since',
        sendingUntil: 'until',
      });
      const entry = { key: 'n2', orderId: 'c1', kind: 'checkout_receipt' as const, recipient: 'a@example.com' };
      await expect(
        migrated.claimNotification({ ...entry, subject: 'Receipt', messageId: '<m2@x>' }),
      ).resolves.toMatchObject({
        kind: 'checkout_receipt',
        status: 'pending',
      });
    } finally {
      await migrated.close();
    }
  });
});
