// A PayloadCodec that encrypts every payload with AES-256-GCM: the serialized payload (its
// encoding and data), deflated when that makes it smaller, becomes the ciphertext, and the key's
// id travels in the metadata so that payloads written before a key rotation still decode.
import { METADATA_ENCODING_KEY, type Payload, type PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { DEFLATE_DICTIONARY_1 } from './deflate-dictionary';
import type { Keyring } from './keyring';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';
const IV_BYTES = 12;
const TAG_BYTES = 16;
// A serialized Payload never begins with a byte below 8 (field number 0 does not exist), so one marks a
// plaintext deflated against dictionary 1; payloads sealed before compression, or too small to gain, have none.
const DEFLATED = 1;
const WORTH_DEFLATING = 32;
// A 4 KB window and little memory: zlib sets its state up on every call, and our payloads are small.
const DEFLATING = { dictionary: DEFLATE_DICTIONARY_1, windowBits: 12, memLevel: 4 };
// Any window up to 15 inflates (one of 15 too); bounded, so a forged payload cannot fill the memory.
const INFLATING = { dictionary: DEFLATE_DICTIONARY_1, windowBits: 15, maxOutputLength: 64 << 20 };

const utf8 = (text: string) => new TextEncoder().encode(text);
const text = (bytes: Uint8Array | undefined | null) => (bytes ? Buffer.from(bytes).toString('utf8') : undefined);

export interface SealOptions {
  /** Deflate each payload before encrypting it (the default); off while a build that cannot inflate still runs. */
  compress?: boolean;
}

export class EncryptionCodec implements PayloadCodec {
  private readonly compress: boolean;

  constructor(
    private readonly keyring: Keyring,
    options: SealOptions = {},
  ) {
    this.compress = options.compress ?? true;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const id = this.keyring.current;
    const key = this.keyring.keys.get(id)!;
    return payloads.map((payload) => {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      // The key id is authenticated too: a payload relabelled with another id does not decode.
      cipher.setAAD(Buffer.from(id));
      const sealed = Buffer.concat([cipher.update(this.plaintext(payload)), cipher.final()]);
      return {
        metadata: { [METADATA_ENCODING_KEY]: utf8(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: utf8(id) },
        data: Buffer.concat([iv, sealed, cipher.getAuthTag()]),
      };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => {
      // Payloads from before encryption was on (or sent plain by another client) pass through.
      if (text(payload.metadata?.[METADATA_ENCODING_KEY]) !== ENCRYPTED_ENCODING) return payload;
      const id = text(payload.metadata?.[KEY_ID_METADATA]) ?? '(none)';
      const key = this.keyring.keys.get(id);
      if (!key)
        throw new Error(
          `payload encrypted with key ${id}, which this process does not have (it has ${[...this.keyring.keys.keys()].join(', ')}); add it to PAYLOAD_KEYS after the newest`,
        );
      const data = Buffer.from(payload.data ?? []);
      if (data.length < IV_BYTES + TAG_BYTES)
        throw new Error(`payload encrypted with key ${id} is truncated (${data.length} bytes)`);
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(id));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      let plain: Buffer;
      try {
        plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
      } catch {
        throw new Error(
          `payload encrypted with key ${id} failed authentication: it was altered, or key ${id} is not the key it was written with`,
        );
      }
      return temporal.api.common.v1.Payload.decode(plain[0] === DEFLATED ? inflated(plain, id) : plain) as Payload;
    });
  }

  /** The payload serialized, deflated behind its marker when that is shorter. */
  private plaintext(payload: Payload): Uint8Array {
    const plain = temporal.api.common.v1.Payload.encode(payload).finish();
    if (!this.compress || plain.length < WORTH_DEFLATING) return plain;
    const deflated = deflateRawSync(plain, DEFLATING);
    return deflated.length + 1 < plain.length ? Buffer.concat([Buffer.of(DEFLATED), deflated]) : plain;
  }
}

function inflated(plain: Buffer, id: string): Buffer {
  try {
    return inflateRawSync(plain.subarray(1), INFLATING);
  } catch {
    throw new Error(`payload encrypted with key ${id} decrypts, but its deflated contents do not inflate`);
  }
}
