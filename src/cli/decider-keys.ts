// A decider's Ed25519 key pair and what is signed with it: `npm run decide -- keygen` writes the
// private key (PKCS#8 PEM, mode 0600) and prints the public key for DECIDERS; `npm run decide`
// signs with it here (node:crypto). The run verifies in workflow code (src/saga/workflow/signature-check.ts).
import crypto, { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { decisionStatement, keyIdOf, type DecisionInput, type SignedFields } from '../contract';

export interface DeciderKey {
  file: string;
  privateKey: KeyObject;
  /** 64 hex digits, as DECIDERS holds it. */
  publicKey: string;
  keyId: string;
}

/** Where a decider's private key is kept unless --key (or DECIDER_KEY_FILE) says otherwise. */
export const defaultKeyFile = (name: string) => path.join(os.homedir(), '.durable-refunds', `${name}.key`);

const publicHex = (key: KeyObject) => Buffer.from(key.export({ format: 'jwk' }).x!, 'base64url').toString('hex');

/** A new key pair, in memory. */
export function newKeyPair(): Omit<DeciderKey, 'file'> {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
  return { privateKey, publicKey: publicHex(publicKey), keyId: keyIdOf(publicHex(publicKey)) };
}

/** Writes a new private key to `file` (never over an existing one), readable by its owner only. */
export function generateKey(file: string): DeciderKey {
  const key = newKeyPair();
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  fs.writeFileSync(file, key.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  return { file, ...key };
}

export function readKey(file: string): DeciderKey {
  const mode = fs.statSync(file).mode & 0o777;
  if (mode & 0o077) throw new Error(`${file} can be read by others (mode ${mode.toString(8)}): chmod 600 ${file}`);
  const privateKey = crypto.createPrivateKey(fs.readFileSync(file));
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`${file} is not an Ed25519 private key`);
  const publicKey = publicHex(crypto.createPublicKey(privateKey));
  return { file, privateKey, publicKey, keyId: keyIdOf(publicKey) };
}

/** The decision signed for one run and the parking it answers (decisionAddress), valid for `ttlMs` from `now`. */
export function signDecision(
  input: SignedFields,
  to: { workflowId: string; answers: string },
  key: Pick<DeciderKey, 'privateKey'>,
  ttlMs: number,
  now = Date.now(),
): DecisionInput {
  const fields = {
    ...to,
    expiresAt: new Date(now + ttlMs).toISOString(),
    nonce: crypto.randomBytes(16).toString('hex'),
  };
  const statement = Buffer.from(decisionStatement(input, fields));
  const signature = crypto.sign(null, statement, key.privateKey).toString('hex');
  return { ...input, reason: input.reason.trim(), signed: { ...fields, signature } };
}
