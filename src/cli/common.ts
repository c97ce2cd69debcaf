import { Client, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { InvalidArgumentError, type Command } from 'commander';
import { outcomeOf, type RunOutcome } from '../client/outcome';
import type { Config } from '../config';
import { decideCommand, decisionAddress } from '../contract';
import { payloadKeyring, refundDataConverter } from '../codec/data-converter';
import { connectTemporal, workerPolling } from '../temporal/client';
import { openStore, type OrderStore } from '../store';

/** An option's parser: a whole number, or a usage error that names the option. */
export const wholeNumber = (name: string) => (value: string) => {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number, got "${value}"`);
  return Number(value);
};

/** Who asks: --requested-by, else $USER; neither is a usage error (exit 2). */
export const requester = (program: Command): string =>
  program.opts().requestedBy ??
  process.env.USER ??
  program.error(`${program.name()}: --requested-by is required when $USER is not set`, { exitCode: 2 });

/** A client for the configured Temporal server, with an error that says what to do when it is down. */
export async function connectClient(config: Config): Promise<Client> {
  const connection = await connectTemporal(config, 'start the stack with `npm run dev` or `npm run demo`', '5s');
  try {
    return new Client({
      connection,
      namespace: config.temporal.namespace,
      dataConverter: refundDataConverter(payloadKeyring(config)),
    });
  } catch (err) {
    await connection.close();
    throw err;
  }
}

/** Runs `fn` with a client for the configured Temporal, closing it after. */
export async function withClient<T>(config: Config, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = await connectClient(config);
  try {
    return await fn(client);
  } finally {
    await client.connection.close();
  }
}

/** Runs `fn` with the configured store, closing it after. */
export async function withStore<T>(config: Config, fn: (store: OrderStore) => Promise<T>): Promise<T> {
  const store = await openStore(config.databaseUrl);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** The message a person needs: for a failed workflow, its failure rather than the wrapper's. */
export function errorMessage(err: unknown): string {
  if (err instanceof WorkflowFailedError) return err.cause?.message ?? err.message;
  return err instanceof Error ? err.message : String(err);
}

/** Runs a command's main: an error exits with the code `exit` gives it (1 if none), said as it says or as its own. */
export function exitOnError(cli: string, main: Promise<unknown>, exit?: (err: unknown) => Exit) {
  main.catch((err: unknown) => {
    const said = exit?.(err) ?? 1;
    const { code, message } = typeof said === 'number' ? { code: said, message: errorMessage(err) } : said;
    console.error(`${cli}: ${message}`);
    process.exit(code);
  });
}
type Exit = number | { code: number; message: string } | undefined;

/** Names a started run and, unless told not to wait, waits for how it comes out and prints it. */
export async function followRun(cli: string, client: Client, config: Config, handle: WorkflowHandle, wait: boolean) {
  console.log(`workflow ${handle.workflowId}`);
  if (!wait) return;
  if (!(await workerPolling(client, config.taskQueue)))
    console.error(
      `${cli}: no worker is polling task queue "${config.taskQueue}" on ${config.temporal.address}, so nothing will run yet; ` +
        'start one with `npm start` (or the whole stack with `npm run dev`). Waiting for it…',
    );
  printOutcome(cli, handle.workflowId, await outcomeOf(handle as Parameters<typeof outcomeOf>[0]));
}

/** Prints how a run came out: its result (exit 3 unless it completed), or, parked, its verdict and how to decide. */
export function printOutcome(cli: string, workflowId: string, outcome: RunOutcome): void {
  if (outcome.kind === 'parked') {
    const { state } = outcome;
    const decide = decideCommand(
      workflowId,
      state.parked?.decision ?? '<decision>',
      state.parked && decisionAddress(state),
    );
    console.error(
      `${cli}: ${workflowId} needs a person. ${state.parked?.verdict}: ${state.outcome?.reason}\n` +
        `next: ${state.parked?.nextAction}; see \`npm run inspect -- ${workflowId}\`, decide with \`${decide}\``,
    );
    process.exitCode = 3;
    return;
  }
  console.log(JSON.stringify(outcome.result, null, 2));
  if (outcome.result.status !== 'completed') process.exitCode = 3;
}
