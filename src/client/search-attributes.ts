// The search attributes refund runs upsert, as a namespace has them: which are missing, adding
// them (`npm run setup-cluster`, the local stack), and the worker's start-up check.
import { Connection } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config';
import { SEARCH_ATTRIBUTES } from '../shared';

/** How the `temporal` CLI names a search attribute's type. */
export const cliType = (type: SearchAttributeType) => (type === SearchAttributeType.BOOL ? 'Bool' : 'Keyword');
const indexedType = (type: SearchAttributeType) =>
  type === SearchAttributeType.BOOL ? temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_BOOL : temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;

/** Our search attributes the namespace does not have. */
export async function missingSearchAttributes(connection: Connection, namespace: string) {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  return Object.values(SEARCH_ATTRIBUTES).filter((key) => !(key.name in (customAttributes ?? {})));
}

/**
 * Registers our search attributes the namespace lacks (a no-op when it has them all) and waits
 * until the server lists them; returns the names it added.
 */
export async function registerSearchAttributes(connection: Connection, namespace: string, log: (msg: string) => void = () => undefined): Promise<string[]> {
  const missing = await missingSearchAttributes(connection, namespace);
  if (missing.length === 0) return [];
  log(`registering search attributes ${missing.map((k) => k.name).join(', ')}`);
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((k) => [k.name, indexedType(k.type)])),
  });
  for (const deadline = Date.now() + 30_000; (await missingSearchAttributes(connection, namespace)).length > 0; await sleep(250)) {
    if (Date.now() > deadline) throw new Error('the search attributes did not become ready within 30s');
  }
  return missing.map((k) => k.name);
}

/**
 * Workflow tasks that upsert a search attribute the namespace lacks fail, over and over: a worker
 * says so at start-up instead, and names the fix.
 */
export async function requireSearchAttributes(config: Config): Promise<void> {
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...config.temporal.connection, connectTimeout: '10s' });
  } catch (err) {
    throw new Error(`cannot reach Temporal at ${config.temporal.address} (${(err as Error).message}); start the stack with \`npm run dev\`, or set TEMPORAL_ADDRESS or TEMPORAL_PROFILE`, { cause: err });
  }
  try {
    const missing = await missingSearchAttributes(connection, config.temporal.namespace);
    if (missing.length > 0) {
      const names = missing.map((k) => k.name).join(', ');
      throw new Error(
        `namespace ${config.temporal.namespace} on ${config.temporal.address} lacks the search attributes ${names}; ` +
          `\`npm run setup-cluster\` registers them (\`npm run dev\` does on a local server), or: ${missing.map((k) => `temporal operator search-attribute create --name ${k.name} --type ${cliType(k.type)}`).join('; ')}`,
      );
    }
  } finally {
    await connection.close();
  }
}
