// One refund end to end on the embedded stack. Safe to run again: the same order is refunded once.
import { Command } from 'commander';
import { createStripeClient } from '../../../src/activities/stripe-client';
import { startRefund } from '../../../src/client/refunds';
import { outcomeOf } from '../../../src/client/outcome';
import { seedPaidOrder } from '../shop/orders';
import path from 'node:path';
import { loadToolsConfig, type ToolsConfig } from '../config';
import { ensureStack, urls } from '../stack/stack';
import { findTool } from '../stack/tools';
import { openStore } from '../../../src/store';
import { connectClient, errorMessage } from '../../../src/cli/common';

const program = new Command('demo')
  .description('Bring up the stack, seed a paid order and refund part of it through the refund workflow.')
  .option('--order <id>', 'order id to seed and refund', 'demo-order-1')
  .showHelpAfterError();

async function main() {
  const { order: orderId } = program.parse().opts<{ order: string }>();
  const config = loadToolsConfig();
  await ensureStack(config, { worker: true });

  const store = await openStore(config.databaseUrl);
  const stripe = createStripeClient(config.stripe);
  const order = await seedPaidOrder(stripe, store, {
    orderId,
    amount: 5000,
    currency: 'usd',
    customerEmail: 'customer@example.test',
  });
  await store.close();
  console.log(`order ${order.id}: ${order.amount} ${order.currency} paid by ${order.paymentIntentId}`);

  const client = await connectClient(config);
  try {
    const { workflowId, handle } = await startRefund(
      client,
      {
        orderId,
        amount: 1250,
        currency: 'usd',
        reason: 'requested_by_customer',
        requestedBy: 'demo',
      },
      config.taskQueue,
    );
    console.log(`refund workflow ${workflowId} running...`);
    const outcome = await outcomeOf(handle);
    if (outcome.kind === 'parked') {
      throw new Error(
        `${workflowId} needs a person (${outcome.state.parked?.verdict}): ${outcome.state.outcome?.reason}; see \`npm run inspect -- ${workflowId}\``,
      );
    }
    const result = outcome.result;
    if (result.status !== 'completed') throw new Error(`${workflowId} ended ${result.status}: ${result.reason}`);
    const u = urls(config);
    const temporal = temporalCommand(config);
    console.log(`
workflow id   ${result.workflowId}
operation     ${result.operationId}
refund id     ${result.refund.refundId} (${result.refund.amount} ${result.refund.currency}, ${result.refund.status})
order status  ${result.order.status} (refunded ${result.order.refundedAmount} of ${order.amount})
message id    ${result.notification.messageId} to ${result.notification.recipient}`);
    if (config.stripe.local)
      console.log(
        await effectCounts(
          config.stripe.apiBase!,
          config.mail.mailboxUrl,
          order.paymentIntentId,
          result.notification.messageId,
        ),
      );
    console.log(`
Look at the run:
  Web UI        ${u.webUi}/${result.workflowId}
  CLI           ${temporal} workflow show --workflow-id ${result.workflowId}
  step table    ${temporal} workflow query --workflow-id ${result.workflowId} --type steps
The stack keeps running in the background; \`npm run stop\` stops it.`);
  } finally {
    await client.connection.close();
  }
}

/** The CLI invocation a reader can paste: the binary we used, pointed at our server. */
function temporalCommand(config: ToolsConfig): string {
  const cli = findTool('temporal');
  const bin =
    cli === 'temporal' || process.env.PATH?.split(':').some((dir) => path.join(dir, 'temporal') === cli)
      ? 'temporal'
      : cli;
  const address = config.temporal.address === '127.0.0.1:7233' ? '' : ` --address ${config.temporal.address}`;
  // Payloads are encrypted: the CLI shows them through the codec server, as the Web UI does.
  return `${bin}${address}${config.encryption.enabled ? ` --codec-endpoint ${config.codec.endpoint}` : ''}`;
}

/** What the providers really did for this order, read from their own records. */
async function effectCounts(
  stripeBase: string,
  mailboxUrl: string,
  paymentIntentId: string,
  messageId: string,
): Promise<string> {
  const ledger = (await (await fetch(`${stripeBase}/_ledger?payment_intent=${paymentIntentId}`)).json()) as {
    effects: { type: string }[];
  };
  const mail = (await (await fetch(`${mailboxUrl}/messages?message_id=${encodeURIComponent(messageId)}`)).json()) as {
    messages: unknown[];
  };
  const refunds = ledger.effects.filter((e) => e.type === 'refund.created').length;
  return `provider      ${refunds} refund(s) on ${paymentIntentId} in the Stripe server's ledger; ${mail.messages.length} message(s) with that id in the mailbox`;
}

main().catch((err) => {
  console.error(`demo: ${errorMessage(err)}`);
  process.exit(1);
});
