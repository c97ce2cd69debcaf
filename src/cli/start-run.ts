// A saga's run started from a command and followed: connect, start it (each saga its own way), name it and, unless
// told not to, wait for how it comes out; and the start of a run its business key allows once.
import { type Client, WorkflowExecutionAlreadyStartedError, type WorkflowHandle } from '@temporalio/client';
import type { Config } from '../config';
import { outcomeOf } from '../client/outcome';
import { decideCommand, decisionAddress, type RefundWorkflow } from '../contract';
import { workerPolling } from '../temporal/client';
import { withClient } from './common';

/** Starts a run and names it; unless told not to wait, prints how it comes out: its result (exit 3 unless it completed), or, parked, its verdict and how to decide. */
export async function startAndFollow(
  cli: string,
  config: Config,
  wait: boolean,
  start: (client: Client) => Promise<WorkflowHandle>,
): Promise<void> {
  await withClient(config, async (client) => {
    const handle = await start(client);
    const { workflowId } = handle;
    console.log(`workflow ${workflowId}`);
    if (!wait) return;
    if (!(await workerPolling(client, config.taskQueue)))
      console.error(
        `${cli}: no worker is polling task queue "${config.taskQueue}" on ${config.temporal.address}, so nothing will run yet; ` +
          'start one with `npm start` (or the whole stack with `npm run dev`). Waiting for it…',
      );
    const outcome = await outcomeOf(handle as WorkflowHandle<RefundWorkflow>);
    if (outcome.kind !== 'result' || outcome.result.status !== 'completed') process.exitCode = 3;
    if (outcome.kind === 'result') return console.log(JSON.stringify(outcome.result, null, 2));
    const { parked, outcome: stopped } = outcome.state;
    const decide = decideCommand(
      workflowId,
      parked?.decision ?? '<decision>',
      parked && decisionAddress(outcome.state),
    );
    console.error(
      `${cli}: ${workflowId} needs a person. ${parked?.verdict}: ${stopped?.reason}\n` +
        `next: ${parked?.nextAction}; see \`npm run inspect -- ${workflowId}\`, decide with \`${decide}\``,
    );
  });
}

/** Starts the key's one run: a run still going is followed, one that ended is not started again. */
export const startOnce = (client: Client, config: Config, workflowType: string, workflowId: string, input: unknown) =>
  client.workflow.start(workflowType, {
    taskQueue: config.taskQueue,
    workflowId,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
  });

/** How a command exits when its key's run has ended already (`once` says why it is not run again); undefined otherwise. */
export const ranOnce = (err: unknown, once: string) =>
  err instanceof WorkflowExecutionAlreadyStartedError
    ? { code: 2, message: `${err.workflowId} has already run; ${once} (npm run inspect -- ${err.workflowId})` }
    : undefined;
