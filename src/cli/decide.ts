// `npm run decide -- <workflow id> <decision> --by <who> --reason …`: sends a decision to a parked
// run as the `decide` Update. The Update id is a business key (the decision and the parking it
// answers), so sending the same decision twice applies it once.
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { Command, Option } from 'commander';
import { workerPolling } from '../temporal/client';
import { REFUND_STEPS } from '../compensations/registry';
import { loadConfig } from '../config';
import { DECISION_KINDS } from '../reliability/policy';
import { decisionUpdate, decisionUpdateId, stepsQuery, type DecisionInput, type RefundWorkflow } from '../contract';
import { connectClient, errorMessage } from './common';

const program = new Command('decide')
  .description('Send a decision to a refund run that waits for one (see `npm run inspect -- <workflow id>`).')
  .argument('<workflow-id>', 'the parked run, e.g. refund-ord_1-v1')
  .addArgument(new Command().createArgument('<decision>', 'the decision').choices(DECISION_KINDS))
  .requiredOption('--by <name>', 'who decides: a name the policy gives a role (DECIDERS)')
  .requiredOption(
    '--reason <why>',
    'why, for the record (for confirm-delivered: your evidence, e.g. where you found the message)',
  )
  .addOption(
    new Option('--step <step>', 'for retry-step: the step (default: the one that failed)').choices(REFUND_STEPS),
  )
  .option('--update-id <id>', 'the Update id (default: derived from the decision and the parking it answers)')
  .option('--json', 'print the decision record as JSON')
  .showHelpAfterError();

class Refused extends Error {}

async function main() {
  program.parse();
  const [workflowId, decision] = program.args as [string, DecisionInput['decision']];
  const opts = program.opts<{
    by: string;
    reason: string;
    step?: DecisionInput['step'];
    updateId?: string;
    json?: boolean;
  }>();
  const config = loadConfig();
  const client = await connectClient(config);
  try {
    // An Update waits for a worker to take it: without one the command would hang.
    if (!(await workerPolling(client, config.taskQueue))) {
      throw new Error(
        `no worker is polling task queue "${config.taskQueue}" on ${config.temporal.address}; start one with \`npm start\`, then decide again`,
      );
    }
    const handle = client.workflow.getHandle<RefundWorkflow>(workflowId);
    const state = await handle.query(stepsQuery);
    const input: DecisionInput = { decision, by: opts.by, reason: opts.reason, ...(opts.step && { step: opts.step }) };
    const updateId = opts.updateId ?? decisionUpdateId(input, state);
    const record = await handle.executeUpdate(decisionUpdate, { args: [input], updateId }).catch((err: unknown) => {
      if (err instanceof WorkflowUpdateFailedError) throw new Refused(err.cause?.message ?? err.message);
      throw err;
    });
    if (opts.json) return console.log(JSON.stringify({ workflowId, updateId, record }, null, 2));
    console.log(
      `${workflowId}: decision #${record.seq} ${record.decision}${record.step ? ` ${record.step}` : ''} by ${record.by} (update id ${updateId})`,
    );
    if (record.outcome === 'awaiting_approval') {
      const approvers = state.parked?.approvedBy.filter((name) => name !== record.by) ?? [];
      console.log(
        `waits for a second person (${approvers.join(', ') || 'an approver'}) until ${record.expiresAt}; unapproved, the run stops.\n` +
          `approve: npm run decide -- ${workflowId} approve --by <approver> --reason "<why>"`,
      );
    } else console.log(`${record.outcome}; \`npm run inspect -- ${workflowId}\` shows where the run is now`);
  } finally {
    await client.connection.close();
  }
}

/** The decision and the parking (or the proposal) it answers: a second send of the same decision is the same Update. */

main().catch((err) => {
  if (err instanceof Refused) {
    console.error(`decide: refused, nothing was recorded: ${err.message}`);
    process.exit(2);
  }
  if (err instanceof WorkflowNotFoundError) {
    console.error(
      `decide: no workflow ${program.args[0]} (\`npm run inspect -- --attention\` lists the runs that wait for a decision)`,
    );
    process.exit(1);
  }
  console.error(`decide: ${errorMessage(err)}`);
  process.exit(1);
});
