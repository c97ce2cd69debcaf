// Carts waiting to be paid, and the stock they reserve: a reservation and its release are each idempotent
// by their step's key, and move every item in one transaction, at the count it read or not at all.
import { sql } from 'kysely';
import type { StockReceipt } from '../contract';
import type { Database, Queryable } from './database';
import {
  differences,
  IntentConflictError,
  InvalidOperationError,
  OrderNotFoundError,
  requireMinorUnits,
} from './errors';

export type { StockReceipt };

/** There is not enough of an item left: nothing of the cart was reserved. */
export class OutOfStockError extends InvalidOperationError {
  override name = 'OutOfStockError';
}

export type CartItem = { sku: string; quantity: number };

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

const now = () => new Date().toISOString();
const receipt = ({ id: cartId, amount, currency }: Cart, changed: boolean) => ({ cartId, amount, currency, changed });

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

  /** Inserts the cart, or returns the one already there when it is the same (anything else is a conflict). */
  async seedCart(cart: NewCart): Promise<Cart> {
    requireMinorUnits('cart amount', cart.amount);
    return this.db.transaction(async (tx) => {
      const stored = await cartOf(tx, cart.id);
      const problems = stored && differences<NewCart>(stored, cart, ['customerEmail', 'currency', 'amount', 'items']);
      if (problems?.length)
        throw new IntentConflictError(
          `cart ${cart.id} already exists with other contents (${problems.join('; ')}); it was not overwritten`,
        );
      if (stored) return stored;
      await tx.run(sql`
        INSERT INTO checkouts (id, customer_email, currency, amount, items_json, created_at)
        VALUES (${cart.id}, ${cart.customerEmail}, ${cart.currency}, ${cart.amount}, ${JSON.stringify(cart.items)}, ${now()})`);
      return (await cartOf(tx, cart.id))!;
    });
  }

  cart(id: string): Promise<Cart | undefined> {
    return cartOf(this.db, id);
  }

  /** Takes the cart's items off the stock under `key`; the same key again changes nothing; a released cart is closed. */
  async reserve(cartId: string, key: string): Promise<StockReceipt> {
    return this.db.transaction(async (tx) => {
      const cart = await requireCart(tx, cartId);
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
      const cart = await requireCart(tx, cartId);
      if (cart.releasedByKey) return receipt(cart, false);
      if (cart.reservedByKey) for (const { sku, quantity } of cart.items) await moveStock(tx, sku, quantity);
      // Closed even when nothing was reserved: a reservation still in flight when its checkout was cancelled is refused.
      await tx.run(sql`UPDATE checkouts SET released_by_key = ${key}, released_at = ${now()} WHERE id = ${cartId}`);
      return receipt(cart, cart.reservedByKey !== null);
    });
  }
}

async function cartOf(q: Queryable, id: string): Promise<Cart | undefined> {
  const row = await q.one(sql<Omit<Cart, 'items'> & { items: string }>`
    SELECT id, customer_email AS "customerEmail", currency, amount, items_json AS items,
      reserved_by_key AS "reservedByKey", released_by_key AS "releasedByKey"
    FROM checkouts WHERE id = ${id}`);
  return row && { ...row, items: JSON.parse(row.items) as CartItem[] };
}

async function requireCart(q: Queryable, id: string): Promise<Cart> {
  const cart = await cartOf(q, id);
  if (!cart) throw new OrderNotFoundError(`cart ${id} does not exist`);
  return cart;
}

/** Moves an item's stock by `by` unless that leaves less than none; whether it moved. */
async function moveStock(q: Queryable, sku: string, by: number): Promise<boolean> {
  const moved = await q.run(sql`
    UPDATE stock SET available = available + ${by}, version = version + 1 WHERE sku = ${sku} AND available + ${by} >= 0`);
  return moved > 0;
}
