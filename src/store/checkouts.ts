// The checkout saga's store: carts waiting to be paid, and the stock they reserve. A reservation
// and its release are each idempotent by their step's key, and each takes its items off (or puts
// them back) in one transaction, every item at the count it read or not at all.
import { sql } from 'kysely';
import type { StockReceipt } from '../contract';
import type { Database, Queryable } from './database';
import { IntentConflictError, InvalidOperationError, OrderNotFoundError, requireMinorUnits } from './errors';

export type { StockReceipt };

/** There is not enough of an item left: nothing of the cart was reserved. */
export class OutOfStockError extends InvalidOperationError {
  override name = 'OutOfStockError';
}

export interface CartItem {
  sku: string;
  quantity: number;
}

export interface NewCart {
  id: string;
  customerEmail: string;
  currency: string;
  amount: number;
  items: CartItem[];
}

export interface Cart extends NewCart {
  reservedByKey: string | null;
  releasedByKey: string | null;
}

interface CartRow {
  id: string;
  customer_email: string;
  currency: string;
  amount: number;
  items_json: string;
  reserved_by_key: string | null;
  released_by_key: string | null;
}

const now = () => new Date().toISOString();
const toCart = (r: CartRow): Cart => ({
  id: r.id,
  customerEmail: r.customer_email,
  currency: r.currency,
  amount: r.amount,
  items: JSON.parse(r.items_json) as CartItem[],
  reservedByKey: r.reserved_by_key,
  releasedByKey: r.released_by_key,
});
const receipt = (c: Cart, changed: boolean): StockReceipt => ({
  cartId: c.id,
  amount: c.amount,
  currency: c.currency,
  changed,
});
/** What a cart is seeded with: the same again is a retry, anything else a conflict. */
const SEEDED = ['customerEmail', 'currency', 'amount', 'items'] as const;

export class SqlCheckouts {
  constructor(private readonly db: Database) {}

  /** Sets an item's stock (seeding, tests, the demo). */
  async setStock(sku: string, available: number): Promise<void> {
    await this.db.run(sql`
      INSERT INTO stock (sku, available, version) VALUES (${sku}, ${available}, 1)
      ON CONFLICT (sku) DO UPDATE SET available = ${available}, version = stock.version + 1`);
  }

  async stock(sku: string): Promise<number | undefined> {
    return (await this.db.one(sql<{ available: number }>`SELECT available FROM stock WHERE sku = ${sku}`))?.available;
  }

  /** Inserts the cart, or returns the one already there when it is the same. */
  async seedCart(cart: NewCart): Promise<Cart> {
    requireMinorUnits('cart amount', cart.amount);
    return this.db.transaction(async (tx) => {
      const existing = await cartRow(tx, cart.id);
      if (existing) {
        const stored = toCart(existing);
        if (SEEDED.some((f) => JSON.stringify(stored[f]) !== JSON.stringify(cart[f])))
          throw new IntentConflictError(`cart ${cart.id} already exists with other contents; it was not overwritten`);
        return stored;
      }
      await tx.run(sql`
        INSERT INTO checkouts (id, customer_email, currency, amount, items_json, created_at)
        VALUES (${cart.id}, ${cart.customerEmail}, ${cart.currency}, ${cart.amount}, ${JSON.stringify(cart.items)}, ${now()})`);
      return toCart((await cartRow(tx, cart.id))!);
    });
  }

  async cart(id: string): Promise<Cart | undefined> {
    const r = await cartRow(this.db, id);
    return r && toCart(r);
  }

  /** Takes the cart's items off the stock under `key`; the same key again changes nothing; a released cart is closed. */
  async reserve(cartId: string, key: string): Promise<StockReceipt> {
    return this.db.transaction(async (tx) => {
      const cart = toCart(await requireCart(tx, cartId));
      // Its checkout was undone (or cancelled before its reservation): checking it out again needs a new cart.
      if (cart.releasedByKey)
        throw new InvalidOperationError(`cart ${cartId} was released by ${cart.releasedByKey}: its checkout is over`);
      if (cart.reservedByKey === key) return receipt(cart, false);
      if (cart.reservedByKey)
        throw new IntentConflictError(`cart ${cartId} was reserved under ${cart.reservedByKey}, not ${key}`);
      for (const { sku, quantity } of cart.items) {
        const taken = await tx.run(sql`
          UPDATE stock SET available = available - ${quantity}, version = version + 1
          WHERE sku = ${sku} AND available >= ${quantity}`);
        // Thrown, every item taken before it is put back with the rest of the transaction.
        if (taken === 0) throw new OutOfStockError(`not enough ${sku} left for ${quantity}; nothing was reserved`);
      }
      await tx.run(sql`UPDATE checkouts SET reserved_by_key = ${key}, reserved_at = ${now()} WHERE id = ${cartId}`);
      return receipt(cart, true);
    });
  }

  /**
   * Puts a reservation's items back under the compensation's own key, once. It closes the cart even when nothing was
   * reserved (a reservation still in flight when its checkout was cancelled is then refused, never left standing).
   */
  async release(cartId: string, key: string): Promise<StockReceipt> {
    return this.db.transaction(async (tx) => {
      const cart = toCart(await requireCart(tx, cartId));
      if (cart.releasedByKey) return receipt(cart, false);
      if (cart.reservedByKey)
        for (const { sku, quantity } of cart.items)
          await tx.run(
            sql`UPDATE stock SET available = available + ${quantity}, version = version + 1 WHERE sku = ${sku}`,
          );
      await tx.run(sql`UPDATE checkouts SET released_by_key = ${key}, released_at = ${now()} WHERE id = ${cartId}`);
      return receipt(cart, cart.reservedByKey !== null);
    });
  }
}

const cartRow = (q: Queryable, id: string) => q.one(sql<CartRow>`SELECT * FROM checkouts WHERE id = ${id}`);

async function requireCart(q: Queryable, id: string): Promise<CartRow> {
  const r = await cartRow(q, id);
  if (!r) throw new OrderNotFoundError(`cart ${id} does not exist`);
  return r;
}
