// Prepares a Temporal cluster we did not start (self-hosted, or Temporal Cloud) for the refund
// workers: registers the search attributes their runs upsert. Idempotent; reads the same
// configuration as the worker (TEMPORAL_ADDRESS / TEMPORAL_PROFILE / temporal.toml …).
import { Command } from 'commander';
import { loadConfig } from '../config';
import { SEARCH_ATTRIBUTES } from '../contract';
import { cliType, connectTemporal, registerSearchAttributes } from '../temporal/client';
import { exitOnError } from './common';

/** gRPC status codes a server answers with when it will not add search attributes this way. */
const PERMISSION_DENIED = 7;
const UNIMPLEMENTED = 12;

new Command('setup-cluster')
  .description('Register the search attributes refund runs use on the configured Temporal namespace (idempotent).')
  .parse();

async function main() {
  const config = loadConfig();
  const { address, namespace } = config.temporal;
  const connection = await connectTemporal(
    config,
    'check TEMPORAL_ADDRESS, TEMPORAL_PROFILE and the TLS / API key settings',
  );
  try {
    const added = await registerSearchAttributes(connection, namespace).catch((err: unknown) => {
      const code = (err as { code?: number }).code;
      if (code !== PERMISSION_DENIED && code !== UNIMPLEMENTED) throw err;
      // Temporal Cloud manages a namespace's search attributes through its own API, not the operator service.
      const flags = Object.values(SEARCH_ATTRIBUTES)
        .map((k) => `--search-attribute ${k.name}=${cliType(k.type)}`)
        .join(' ');
      throw new Error(
        `${address} refused to add search attributes (${(err as Error).message}). On Temporal Cloud, add them with ` +
          `\`tcld namespace search-attributes add --namespace ${namespace} ${flags}\` or in the Cloud UI, then run this again to check`,
        { cause: err },
      );
    });
    // registerSearchAttributes returns once the server lists them all.
    const all = Object.values(SEARCH_ATTRIBUTES).map((k) => k.name);
    console.log(
      added.length > 0
        ? `namespace ${namespace} on ${address}: registered ${added.join(', ')}; all ${all.length} search attributes are in place`
        : `namespace ${namespace} on ${address} already has all ${all.length} search attributes (${all.join(', ')})`,
    );
  } finally {
    await connection.close();
  }
}

exitOnError('setup-cluster', main());
