// How payloads cross to Temporal for every worker and client of this project: encrypted with
// the configured keyring, failures' messages included.
import { METADATA_ENCODING_KEY, type DataConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import type { Config } from '../config';
import { ENCRYPTED_ENCODING, EncryptionCodec, type SealOptions } from './encryption-codec';
import { localKeyring, parseKeyring, type Keyring } from './keyring';
import { UNDECODABLE_ENCODING } from './payload-converter';
import { PLAINTEXT_REFUSED_ENCODING, plaintextRefusal } from './plaintext';
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

/**
 * The data converter for a keyring (none: plaintext payloads); workers and clients must share the keyring.
 * With `refusePlaintext` (a worker's, PAYLOAD_PLAINTEXT=reject), a workflow's own payload (input, Signal,
 * Update, Query argument) that is not encrypted is refused, the refusal naming that codec endpoint. Clients
 * read whatever a history holds; only what a workflow would act on is refused.
 */
export function refundDataConverter(
  keyring: Keyring | undefined,
  options: { refusePlaintext?: { codecEndpoint: string } } & SealOptions = {},
): DataConverter {
  const refusal = keyring && options.refusePlaintext && plaintextRefusal(options.refusePlaintext.codecEndpoint);
  const codec = keyring && new EncryptionCodec(keyring, options);
  return {
    failureConverterPath: FAILURE_CONVERTER_PATH,
    payloadConverterPath: PAYLOAD_CONVERTER_PATH,
    payloadCodecs: codec ? [undecodableMarked(codec, refusal || undefined)] : [],
  };
}

/** The data converter of this configuration's clients (a worker's own among them): they read any history. */
export function clientDataConverter(config: Config, keyring = payloadKeyring(config)): DataConverter {
  return refundDataConverter(keyring, { compress: config.encryption.compress });
}

/** The data converter of this configuration's workers: it refuses plaintext unless PAYLOAD_PLAINTEXT=allow. */
export function workerDataConverter(config: Config, keyring: Keyring | undefined): DataConverter {
  const refuse = config.encryption.plaintext === 'reject';
  return refundDataConverter(keyring, {
    compress: config.encryption.compress,
    ...(refuse && { refusePlaintext: { codecEndpoint: config.codec.endpoint } }),
  });
}

/**
 * A payload the codec cannot decode is marked, not thrown: the worker decodes a whole activation
 * at once, before any handler runs, and one forged Signal would fail its workflow task for good.
 * So is a workflow's own payload sent in plaintext, when this worker refuses plaintext. The payload
 * converter decides what a marked payload becomes (payload-converter.ts).
 */
function undecodableMarked(codec: PayloadCodec, refusal?: string): PayloadCodec {
  return {
    encode: (payloads, context) => codec.encode(payloads, context),
    decode: (payloads, context) =>
      Promise.all(
        payloads.map((payload) => {
          // Activities' payloads come from our own workers only; a workflow's own come from anyone with namespace access.
          if (refusal && context?.type === 'workflow' && !encrypted(payload))
            return marked(PLAINTEXT_REFUSED_ENCODING, refusal);
          return codec.decode([payload], context).then(
            ([decoded]) => decoded!,
            (err: unknown) => marked(UNDECODABLE_ENCODING, err instanceof Error ? err.message : String(err)),
          );
        }),
      ),
  };
}

const utf8 = new TextEncoder();
const encrypted = (payload: Payload) =>
  new TextDecoder().decode(payload.metadata?.[METADATA_ENCODING_KEY] ?? new Uint8Array()) === ENCRYPTED_ENCODING;
const marked = (encoding: string, why: string): Payload => ({
  metadata: { [METADATA_ENCODING_KEY]: utf8.encode(encoding) },
  data: utf8.encode(why),
});
