// How payloads cross to Temporal for every worker and client of this project: encrypted with
// the configured keyring, failures' messages included.
import type { DataConverter } from '@temporalio/common';
import type { Config } from '../config';
import { EncryptionCodec } from './encryption-codec';
import { localKeyring, parseKeyring, type Keyring } from './keyring';
import fs from 'node:fs';

/**
 * The keyring this process encrypts with: PAYLOAD_KEYS, else PAYLOAD_KEYS_FILE, else, for a
 * Temporal server on this machine, a key file of the local stack's own (made on first use).
 * A server elsewhere gets no plaintext by default: it needs keys or PAYLOAD_ENCRYPTION=off.
 */
export function payloadKeyring(config: Config): Keyring | undefined {
  const { encryption } = config;
  if (!encryption.enabled) return undefined;
  if (encryption.keys) return encryption.keys;
  if (encryption.keysFile) {
    if (!fs.existsSync(encryption.keysFile)) throw new Error(`PAYLOAD_KEYS_FILE ${encryption.keysFile} does not exist`);
    return parseKeyring(fs.readFileSync(encryption.keysFile, 'utf8'), `PAYLOAD_KEYS_FILE ${encryption.keysFile}`);
  }
  if (config.temporal.local) return localKeyring(encryption.localKeysFile);
  throw new Error(
    `Temporal at ${config.temporal.address} is not on this machine and no payload keys are set: customers' emails and amounts would be stored there in plaintext. ` +
      'Set PAYLOAD_KEYS (or PAYLOAD_KEYS_FILE), the same on every worker and client; or PAYLOAD_ENCRYPTION=off to store them in plaintext',
  );
}

export const FAILURE_CONVERTER_PATH = require.resolve('./failure-converter');

/** The data converter for a keyring (none: plaintext payloads); workers and clients must share it. */
export function refundDataConverter(keyring: Keyring | undefined): DataConverter {
  return { failureConverterPath: FAILURE_CONVERTER_PATH, payloadCodecs: keyring ? [new EncryptionCodec(keyring)] : [] };
}
