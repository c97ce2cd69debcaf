// Lists an order's refund runs, as Temporal's visibility knows them, and names the next free
// operation version: rejected and invalid runs hold their versions too.
import { Command } from 'commander';
import { nextOperationVersion, orderRuns } from '../client/refunds';
import { loadConfig } from '../config';
import { exitOnError, withClient } from './common';

const program = new Command('operations')
  .description("List an order's refund runs and their states, and the next free operation version.")
  .argument('<order>', 'order id')
  .option('--json', 'print JSON')
  .showHelpAfterError();

async function main() {
  program.parse();
  const [orderId] = program.args as [string];
  const { json } = program.opts<{ json?: boolean }>();
  await withClient(loadConfig(), async (client) => {
    const runs = await orderRuns(client, orderId);
    const next = nextOperationVersion(runs);
    if (json) return console.log(JSON.stringify({ orderId, runs, nextOperationVersion: next }, null, 2));
    if (runs.length === 0) console.log(`no refund runs for order ${orderId}`);
    else
      console.table(
        runs.map((r) => ({
          'workflow id': r.workflowId,
          version: r.operationVersion ?? '-',
          execution: r.execution,
          status: r.refundStatus ?? '-',
          started: r.startTime.toISOString(),
        })),
      );
    console.log(
      `next free operation version: ${next} (npm run refund -- --order ${orderId} --operation-version ${next} …)`,
    );
  });
}

exitOnError('operations', main());
