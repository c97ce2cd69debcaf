// What the shop does before a checkout, stood in for the tests, chaos runs and `npm run cart`: a cart and its
// items' stock put in the store. The product only reads a cart and reserves or releases its stock.
import { sql } from 'kysely';
import { requireMinorUnits, requireSame, type Cart, type OrderStore } from '../../../src/store';

export type NewCart = Omit<Cart, 'reservedByKey' | 'releasedByKey'>;

export async function setStock(store: OrderStore, sku: string, available: number): Promise<void> {
  await store.checkouts.db.run(sql`
    INSERT INTO stock (sku, available, version) VALUES (${sku}, ${available}, 1)
    ON CONFLICT (sku) DO UPDATE SET available = ${available}, version = stock.version + 1`);
}

export async function stockLeft(store: OrderStore, sku: string): Promise<number | undefined> {
  const row = await store.checkouts.db.one(sql<{ available: number }>`SELECT available FROM stock WHERE sku = ${sku}`);
  return row?.available;
}

/** Inserts the cart, or returns the one already there when it is the same (anything else is a conflict). */
export async function seedCart(store: OrderStore, cart: NewCart): Promise<Cart> {
  requireMinorUnits('cart amount', cart.amount);
  const { id, customerEmail, currency, amount, items } = cart;
  await store.checkouts.db.run(sql`
    INSERT INTO checkouts (id, customer_email, currency, amount, items_json, created_at)
    VALUES (${id}, ${customerEmail}, ${currency}, ${amount}, ${JSON.stringify(items)}, ${new Date().toISOString()})
    ON CONFLICT (id) DO NOTHING`);
  const stored = (await store.checkouts.cart(id))!;
  requireSame(
    stored,
    cart,
    ['customerEmail', 'currency', 'amount', 'items'],
    (differences) => `cart ${id} already exists with other contents (${differences}); it was not overwritten`,
  );
  return stored;
}
