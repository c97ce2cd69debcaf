// npm run checkout: checks out a cart in the store and waits for the result (or the parking). With --items the
// cart (and, with --stock, its items' stock) is put in the store first, for trying the saga on a local stack.
import { Command, InvalidArgumentError } from 'commander';
import { loadConfig } from '../config';
import { CHECKOUT_WORKFLOW, checkoutWorkflowId, parseCheckoutRequest } from '../contract';
import { InvalidInputError } from '../domain/zod-problems';
import { exitOnError, requester, wholeNumber, withStore } from './common';
import { ranOnce, startAndFollow, startOnce } from './start-run';

const items = (value: string) =>
  value.split(',').map((item) => {
    const m = /^([A-Za-z0-9_-]{1,64}):(\d{1,6})$/.exec(item.trim());
    if (!m || Number(m[2]) < 1)
      throw new InvalidArgumentError(`--items takes sku:quantity,… (e.g. mug:2,tee:1), got "${item}"`);
    return { sku: m[1]!, quantity: Number(m[2]) };
  });

const program = new Command('checkout')
  .description('Check out a cart through the checkout saga: reserve its stock, charge the card, email the receipt.')
  .requiredOption('--cart <id>', 'the cart to check out')
  .option('--payment-method <pm>', 'a Stripe PaymentMethod id (pm_card_chargeDeclined declines)', 'pm_card_visa')
  .option('--requested-by <who>', 'who asked for the checkout (default: $USER)')
  .option('--items <sku:qty,...>', 'create the cart with these items first', items)
  .option('--amount <minor-units>', 'with --items: the cart total, e.g. 4200 for $42.00', wholeNumber('--amount'))
  .option('--currency <code>', 'with --items: its currency', 'usd')
  .option('--email <address>', "with --items: the customer's address")
  .option('--stock <n>', 'with --items: set each item to this many in stock', wholeNumber('--stock'))
  .option('--no-wait', 'print the workflow id and return without waiting')
  .showHelpAfterError();

async function main() {
  const opts = program.parse().opts();
  const { cart: cartId, paymentMethod } = opts;
  const request = parseCheckoutRequest({ cartId, paymentMethod, requestedBy: requester(program) });
  const config = loadConfig();
  if (opts.items) {
    if (!opts.amount || !opts.email) program.error('checkout: --items needs --amount and --email', { exitCode: 2 });
    await withStore(config, async (store) => {
      for (const { sku } of opts.items) if (opts.stock !== undefined) await store.checkouts.setStock(sku, opts.stock);
      const { amount, currency, email } = opts;
      await store.checkouts.seedCart({ id: request.cartId, customerEmail: email, currency, amount, items: opts.items });
    });
  }
  await startAndFollow('checkout', config, opts.wait, (client) =>
    startOnce(client, config, CHECKOUT_WORKFLOW, checkoutWorkflowId(request.cartId), request),
  );
}

exitOnError(
  'checkout',
  main(),
  (err) => ranOnce(err, 'a cart is checked out once') ?? (err instanceof InvalidInputError ? 2 : undefined),
);
