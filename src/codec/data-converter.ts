// How payloads cross to Temporal for every worker and client of this project: encrypted with
// the configured keyring, failures' messages included.
import { METADATA_ENCODING_KEY, type DataConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import type { Config } from '../config';
import { EncryptionCodec } from './encryption-codec';
import { localKeyring, parseKeyring, type Keyring } from './keyring';
import { UNDECODABLE_ENCODING } from './payload-converter';
import fs from 'node:fs';
import { runningPid } from '../local-stack';

/**
 * The keyring this process encrypts with: PAYLOAD_KEYS, else PAYLOAD_KEYS_FILE, else, while the
 * Temporal dev server this stack started (under DATA_DIR) runs, a key file of the stack's own
 * (made on first use). Any other server, even one reached on loopback through a tunnel or a port
 * forward, gets no plaintext and no made-up key: it needs PAYLOAD_KEYS, or PAYLOAD_ENCRYPTION=off.
 */
export function payloadKeyring(config: Config): Keyring | undefined {
  const { encryption } = config;
  if (!encryption.enabled) return undefined;
  if (encryption.keys) return encryption.keys;
  if (encryption.keysFile) {
    if (!fs.existsSync(encryption.keysFile)) throw new Error(`PAYLOAD_KEYS_FILE ${encryption.keysFile} does not exist`);
    return parseKeyring(fs.readFileSync(encryption.keysFile, 'utf8'), `PAYLOAD_KEYS_FILE ${encryption.keysFile}`);
  }
  if (config.temporal.local && runningPid(config.dataDir, 'temporal') !== undefined)
    return localKeyring(encryption.localKeysFile);
  throw new Error(
    `no payload keys are set, and Temporal at ${config.temporal.address} is not the dev server this stack runs under ${config.dataDir} ` +
      '(start that with `npm run dev` or `npm run demo`). For any other server set PAYLOAD_KEYS (or PAYLOAD_KEYS_FILE), the same on every worker and client, ' +
      "or PAYLOAD_ENCRYPTION=off to store customers' data there in plaintext",
  );
}

export const FAILURE_CONVERTER_PATH = require.resolve('./failure-converter');
export const PAYLOAD_CONVERTER_PATH = require.resolve('./payload-converter');

/** The data converter for a keyring (none: plaintext payloads); workers and clients must share it. */
export function refundDataConverter(keyring: Keyring | undefined): DataConverter {
  return {
    failureConverterPath: FAILURE_CONVERTER_PATH,
    payloadConverterPath: PAYLOAD_CONVERTER_PATH,
    payloadCodecs: keyring ? [new UndecodableMarked(new EncryptionCodec(keyring))] : [],
  };
}

/**
 * A payload the codec cannot decode is marked, not thrown: the worker decodes a whole activation
 * at once, before any handler runs, and one forged Signal would fail its workflow task for good.
 * The payload converter decides what a marked payload becomes (payload-converter.ts).
 */
class UndecodableMarked implements PayloadCodec {
  constructor(private readonly codec: PayloadCodec) {}

  encode(payloads: Payload[]): Promise<Payload[]> {
    return this.codec.encode(payloads);
  }

  decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(
      payloads.map((payload) =>
        this.codec.decode([payload]).then(
          ([decoded]) => decoded,
          (err: unknown) => ({
            metadata: { [METADATA_ENCODING_KEY]: utf8.encode(UNDECODABLE_ENCODING) },
            data: utf8.encode(err instanceof Error ? err.message : String(err)),
          }),
        ),
      ),
    );
  }
}

const utf8 = new TextEncoder();
