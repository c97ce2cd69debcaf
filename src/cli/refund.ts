import { Command } from 'commander';
import { startRefund } from '../client/refunds';
import { ConflictingRefundError } from '../temporal/client';
import { loadConfig } from '../config';
import { InvalidRefundRequestError, REFUND_REASONS, parseRefundRequest } from '../domain/refund-request';
import { refusalsAgainstOrder } from '../queue/csv-import';
import { IntentConflictError } from '../store';
import { exitOnError, requester, wholeNumber, withStore } from './common';
import { startAndFollow } from './start-run';
import { AdmissionRejectedError } from '../client/admission';

const program = new Command('refund')
  .description(
    'Refund an order through the refund workflow and wait for its result. Needs a running stack (npm run dev).',
  )
  .requiredOption('--order <id>', 'order id')
  .requiredOption('--amount <minor-units>', 'amount in minor units, e.g. 1250 for $12.50', wholeNumber('--amount'))
  .option('--currency <code>', 'three-letter currency code (any case)', 'usd')
  .option('--reason <reason>', `one of ${REFUND_REASONS.join(', ')}`, 'requested_by_customer')
  .option('--requested-by <who>', 'who asked for the refund (default: $USER)')
  .option(
    '--operation-version <n>',
    'a changed intent for the same order needs a new version',
    wholeNumber('--operation-version'),
    1,
  )
  .option('--no-wait', 'print the workflow id and return without waiting')
  .option('--queue', 'queue the request for the refund-batch schedule instead of starting it now')
  .showHelpAfterError();

async function main() {
  const opts = program.parse().opts();
  // Validate before connecting, so bad input fails fast and starts nothing.
  const request = parseRefundRequest({
    orderId: opts.order,
    amount: opts.amount,
    currency: opts.currency,
    reason: opts.reason,
    requestedBy: requester(program),
    operationVersion: opts.operationVersion,
  });
  const config = loadConfig();
  if (opts.queue)
    return withStore(config, async (store) => {
      const problems = await refusalsAgainstOrder(store, request);
      if (problems.length)
        throw new InvalidRefundRequestError(
          `not queued: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}`,
        );
      const { queued, created } = await store.queue.enqueue(request, 'cli');
      const was = created
        ? 'queued'
        : queued.status === 'queued'
          ? 'already queued'
          : `already ${queued.status}${queued.workflowId ? ` as ${queued.workflowId}` : ''}`;
      console.log(
        `${was}: request #${queued.id}, order ${request.orderId} v${request.operationVersion}; the refund-batch schedule starts queued requests (npm run queue -- list)`,
      );
    });
  const { taskQueue, admission } = config;
  await startAndFollow('refund', config, opts.wait, async (client) => {
    return (await startRefund(client, request, taskQueue, admission.maxBacklog)).handle;
  });
}

exitOnError('refund', main(), (err) =>
  // EX_TEMPFAIL: nothing was done, and the same command may succeed later.
  err instanceof AdmissionRejectedError
    ? 75
    : [InvalidRefundRequestError, ConflictingRefundError, IntentConflictError].some((E) => err instanceof E)
      ? 2
      : undefined,
);
