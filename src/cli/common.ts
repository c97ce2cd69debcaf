import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { InvalidArgumentError, type Command } from 'commander';
import type { RunOutcome } from '../client/outcome';
import type { Config } from '../config';
import { decideCommand, decisionAddress } from '../contract';
import { payloadKeyring, refundDataConverter } from '../codec/data-converter';

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
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...config.temporal.connection, connectTimeout: '5s' });
  } catch (err) {
    throw new Error(
      `cannot reach Temporal at ${config.temporal.address} (${(err as Error).message}); start the stack with \`npm run dev\` or \`npm run demo\``,
      { cause: err },
    );
  }
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

/** The message a person needs: for a failed workflow, its failure rather than the wrapper's. */
export function errorMessage(err: unknown): string {
  if (err instanceof WorkflowFailedError) return err.cause?.message ?? err.message;
  return err instanceof Error ? err.message : String(err);
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
