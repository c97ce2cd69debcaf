// npm run checkout: checks out a cart in the store and waits for the result (or the parking). On a local stack,
// `npm run cart` (tools/) puts one there first.
import { Command } from 'commander';
import { loadConfig } from '../config';
import { CHECKOUT_WORKFLOW, checkoutWorkflowId, parseCheckoutRequest } from '../contract';
import { InvalidInputError } from '../domain/zod-problems';
import { exitOnError, requester } from './common';
import { ranOnce, startAndFollow, startOnce } from './start-run';

const program = new Command('checkout')
  .description('Check out a cart through the checkout saga: reserve its stock, charge the card, email the receipt.')
  .requiredOption('--cart <id>', 'the cart to check out')
  .option('--payment-method <pm>', 'a Stripe PaymentMethod id (pm_card_chargeDeclined declines)', 'pm_card_visa')
  .option('--requested-by <who>', 'who asked for the checkout (default: $USER)')
  .option('--no-wait', 'print the workflow id and return without waiting')
  .showHelpAfterError();

async function main() {
  const opts = program.parse().opts();
  const { cart: cartId, paymentMethod } = opts;
  const request = parseCheckoutRequest({ cartId, paymentMethod, requestedBy: requester(program) });
  const config = loadConfig();
  await startAndFollow('checkout', config, opts.wait, (client) =>
    startOnce(client, config, CHECKOUT_WORKFLOW, checkoutWorkflowId(request.cartId), request),
  );
}

exitOnError(
  'checkout',
  main(),
  (err) => ranOnce(err, 'a cart is checked out once') ?? (err instanceof InvalidInputError ? 2 : undefined),
);
