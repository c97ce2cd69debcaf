// The codec server on its own, for a Web UI that is not the local stack's (a self-hosted UI or
// Temporal Cloud's): it decodes with the same keys as the workers. `--new-key` prints a key.
import { Command } from 'commander';
import { loadConfig } from '../config';
import { startConfiguredCodecServer } from '../codec/codec-server';
import { newKeyEntry } from '../codec/keyring';
import { exitOnError } from './common';

const options = new Command('codec-server')
  .description('Serve /encode and /decode for the Temporal Web UI and `temporal --codec-endpoint`, with PAYLOAD_KEYS.')
  .option('--new-key', 'print a new key entry (id:base64key) to put first in PAYLOAD_KEYS, and exit')
  .showHelpAfterError()
  .parse()
  .opts<{ newKey?: boolean }>();

async function main() {
  if (options.newKey) return console.log(newKeyEntry());
  const started = await startConfiguredCodecServer(loadConfig());
  if (!started) throw new Error('PAYLOAD_ENCRYPTION=off: there is nothing to decode');
  const { server, summary } = started;
  console.log(summary);
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

exitOnError('codec-server', main());
