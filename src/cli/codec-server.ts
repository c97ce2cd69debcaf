// The codec server on its own, for a Web UI that is not the local stack's (a self-hosted UI or
// Temporal Cloud's): it decodes with the same keys as the workers. `--new-key` prints a key.
import { Command } from 'commander';
import { loadConfig } from '../config';
import { configuredCodecServer, startCodecServer } from '../codec/codec-server';
import { payloadKeyring } from '../codec/data-converter';
import { EncryptionCodec } from '../codec/encryption-codec';
import { newKeyEntry } from '../codec/keyring';

const options = new Command('codec-server')
  .description('Serve /encode and /decode for the Temporal Web UI and `temporal --codec-endpoint`, with PAYLOAD_KEYS.')
  .option('--new-key', 'print a new key entry (id:base64key) to put first in PAYLOAD_KEYS, and exit')
  .showHelpAfterError()
  .parse()
  .opts<{ newKey?: boolean }>();

async function main() {
  if (options.newKey) {
    console.log(newKeyEntry());
    return;
  }
  const config = loadConfig();
  const keyring = payloadKeyring(config);
  if (!keyring) throw new Error('PAYLOAD_ENCRYPTION=off: there is nothing to decode');
  const server = await startCodecServer(configuredCodecServer(config, new EncryptionCodec(keyring)));
  const c = config.codec;
  console.log(
    `codec server on ${server.url} for namespace ${config.temporal.namespace}, keys ${[...keyring.keys.keys()].join(', ')} (encrypting with ${keyring.current}); ` +
      `answers ${c.origins.join(', ')}${c.authToken ? ', bearer token required' : ''}`,
  );
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err) => {
  console.error(`codec-server: ${(err as Error).message}`);
  process.exit(1);
});
