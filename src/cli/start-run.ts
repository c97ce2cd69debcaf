// A saga's run started from a command and followed: connect, start it (each saga its own way), name it and, unless
// told not to, wait for how it comes out; and the start of a run its business key allows once.
import { type Client, WorkflowExecutionAlreadyStartedError, type WorkflowHandle } from '@temporalio/client';
import type { Config } from '../config';
import { followRun, withClient } from './common';

export async function startAndFollow(
  cli: string,
  config: Config,
  wait: boolean,
  start: (client: Client) => Promise<WorkflowHandle>,
): Promise<void> {
  await withClient(config, async (client) => followRun(cli, client, config, await start(client), wait));
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
