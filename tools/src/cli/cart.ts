// npm run cart: puts a cart (and, with --stock, its items' stock) in the store as the shop would, for trying the
// checkout saga on a local stack: `npm run checkout -- --cart ID` then checks it out.
import { Command, InvalidArgumentError } from 'commander';
import { exitOnError, withStore } from '../../../src/cli/common';
import { loadConfig } from '../../../src/config';
import { seedCart, setStock } from '../shop/carts';
import { wholeNumber } from './options';

const items = (value: string) =>
  value.split(',').map((item) => {
    const m = /^([A-Za-z0-9_-]{1,64}):(\d{1,6})$/.exec(item.trim());
    if (!m || Number(m[2]) < 1)
      throw new InvalidArgumentError(`--items takes sku:quantity,… (e.g. mug:2,tee:1), got "${item}"`);
    return { sku: m[1]!, quantity: Number(m[2]) };
  });

const program = new Command('cart')
  .description('Put a cart in the store, as the shop would, for `npm run checkout` to check out.')
  .requiredOption('--id <id>', 'the cart id')
  .requiredOption('--items <sku:qty,...>', 'its items', items)
  .requiredOption('--amount <minor-units>', 'its total, e.g. 4200 for $42.00', wholeNumber(1, Number.MAX_SAFE_INTEGER))
  .option('--currency <code>', 'its currency', 'usd')
  .requiredOption('--email <address>', "the customer's address")
  .option('--stock <n>', 'set each item to this many in stock', wholeNumber(0, 1_000_000))
  .showHelpAfterError();

async function main() {
  const { id, items, amount, currency, email, stock } = program.parse().opts();
  const cart = await withStore(loadConfig(), async (store) => {
    if (stock !== undefined) for (const { sku } of items) await setStock(store, sku, stock);
    return seedCart(store, { id, customerEmail: email, currency, amount, items });
  });
  console.log(
    `cart ${cart.id}: ${cart.amount} ${cart.currency}; check it out with \`npm run checkout -- --cart ${id}\``,
  );
}

exitOnError('cart', main());
