// Carts waiting to be paid, and the stock they reserve: a reservation and its release are each idempotent
// by their step's key, and move every item in one transaction, at the count it read or not at all.
import { sql } from 'kysely';
import type { StockReceipt } from '../contract';
import type { Database, Queryable } from './database';
import { IntentConflictError, InvalidOperationError, OrderNotFoundError } from './errors';

export type { StockReceipt };

/** There is not enough of an item left: nothing of the cart was reserved. */
export class OutOfStockError extends InvalidOperationError {}

export interface Cart {
  id: string;
  customerEmail: string;
  currency: string;
  amount: number;
  items: { sku: string; quantity: number }[];
  reservedByKey: string | null;
  releasedByKey: string | null;
}

const now = () => new Date().toISOString();
const receipt = ({ id: cartId, amount, currency }: Cart, changed: boolean) => ({ cartId, amount, currency, changed });

export class SqlCheckouts {
  /** The shop's stand-in in tools/ puts carts and stock in through it. */
  constructor(readonly db: Database) {}

  async cart(id: string, q: Queryable = this.db): Promise<Cart | undefined> {
    const row = await q.one(sql<Omit<Cart, 'items'> & { items: string }>`
      SELECT id, customer_email AS "customerEmail", currency, amount, items_json AS items,
        reserved_by_key AS "reservedByKey", released_by_key AS "releasedByKey"
      FROM checkouts WHERE id = ${id}`);
    return row && { ...row, items: JSON.parse(row.items) as Cart['items'] };
  }

  private async existing(q: Queryable, id: string): Promise<Cart> {
    const cart = await this.cart(id, q);
    if (!cart) throw new OrderNotFoundError(`cart ${id} does not exist`);
    return cart;
  }

  /** Takes the cart's items off the stock under `key`; the same key again changes nothing; a released cart is closed. */
  async reserve(cartId: string, key: string): Promise<StockReceipt> {
    return this.db.transaction(async (tx) => {
      const cart = await this.existing(tx, cartId);
      // Its checkout was undone (or cancelled before its reservation): checking it out again needs a new cart.
      if (cart.releasedByKey)
        throw new InvalidOperationError(`cart ${cartId} was released by ${cart.releasedByKey}: its checkout is over`);
      if (cart.reservedByKey === key) return receipt(cart, false);
      if (cart.reservedByKey)
        throw new IntentConflictError(`cart ${cartId} was reserved under ${cart.reservedByKey}, not ${key}`);
      for (const { sku, quantity } of cart.items)
        // Thrown, every item taken before it is put back with the rest of the transaction.
        if (!(await moveStock(tx, sku, -quantity)))
          throw new OutOfStockError(`not enough ${sku} left for ${quantity}; nothing was reserved`);
      await tx.run(sql`UPDATE checkouts SET reserved_by_key = ${key}, reserved_at = ${now()} WHERE id = ${cartId}`);
      return receipt(cart, true);
    });
  }

  /** Puts a reservation's items back under the compensation's own key, once, and closes the cart. */
  async release(cartId: string, key: string): Promise<StockReceipt> {
    return this.db.transaction(async (tx) => {
      const cart = await this.existing(tx, cartId);
      if (cart.releasedByKey) return receipt(cart, false);
      if (cart.reservedByKey) for (const { sku, quantity } of cart.items) await moveStock(tx, sku, quantity);
      // Closed even when nothing was reserved: a reservation still in flight when its checkout was cancelled is refused.
      await tx.run(sql`UPDATE checkouts SET released_by_key = ${key}, released_at = ${now()} WHERE id = ${cartId}`);
      return receipt(cart, cart.reservedByKey !== null);
    });
  }
}

/** Moves an item's stock by `by` unless that leaves less than none; whether it moved. */
async function moveStock(q: Queryable, sku: string, by: number): Promise<boolean> {
  const moved = await q.run(sql`
    UPDATE stock SET available = available + ${by}, version = version + 1 WHERE sku = ${sku} AND available + ${by} >= 0`);
  return moved > 0;
}
