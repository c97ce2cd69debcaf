import { Client, WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../config';
import { clientDataConverter } from '../codec/data-converter';
import { connectTemporal } from '../temporal/client';
import { openStore, type OrderStore } from '../store';

/** An option's parser: a whole number (at least `min`), or a usage error that names the option. */
export const wholeNumber =
  (name: string, min = 0) =>
  (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) < min)
      throw new InvalidArgumentError(
        `${name} must be a whole number${min ? ` of at least ${min}` : ''}, got "${value}"`,
      );
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
      dataConverter: clientDataConverter(config),
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

/** How a command that names a run exits when there is none: 1, pointing to the runs that `--attention` lists (`which`). */
export const noSuchRun = (err: unknown, workflowId: string | undefined, which: string) =>
  err instanceof WorkflowNotFoundError
    ? {
        code: 1,
        message: `no workflow ${workflowId} (\`npm run inspect -- --attention\` lists the runs that ${which})`,
      }
    : undefined;

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
