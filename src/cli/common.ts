import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import type { Config } from '../config';
import { payloadKeyring, refundDataConverter } from '../codec/data-converter';

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
