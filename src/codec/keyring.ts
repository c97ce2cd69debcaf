// The payload encryption keys: which one encrypts (the newest) and every one that may still
// decrypt (the older ones, until no retained history uses them).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface Keyring {
  /** The id of the key new payloads are encrypted with. */
  current: string;
  keys: ReadonlyMap<string, Buffer>;
}

const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Reads `id:base64key` entries, newest first, separated by commas or newlines; each key is 32
 * random bytes (AES-256). `source` names where the text came from, for the error.
 */
export function parseKeyring(text: string, source: string): Keyring {
  const lines = text.split('\n').filter((line) => !line.trim().startsWith('#'));
  const entries = lines
    .flatMap((line) => line.split(','))
    .map((e) => e.trim())
    .filter(Boolean);
  if (entries.length === 0)
    throw new Error(
      `${source}: no keys; expected id:base64key entries, newest first (\`npm run codec-server -- --new-key\` makes one)`,
    );
  const keys = new Map<string, Buffer>();
  for (const [index, entry] of entries.entries()) {
    const [id, encoded, ...rest] = entry.split(':');
    // Never echoed: the entry may hold key material.
    if (!id || !KEY_ID.test(id) || encoded === undefined || rest.length > 0)
      throw new Error(
        `${source}: entry ${index + 1} is not id:base64key (ids are 1-64 letters, digits, ".", "_" or "-")`,
      );
    const key = Buffer.from(encoded, 'base64');
    if (key.length !== 32 || key.toString('base64') !== encoded)
      throw new Error(`${source}: key ${id} is not 32 bytes of base64 (AES-256 needs exactly 32)`);
    if (keys.has(id)) throw new Error(`${source}: key id ${id} appears twice`);
    keys.set(id, key);
  }
  return { current: entries[0]!.split(':')[0]!, keys };
}

/** A new key entry, `id:base64key`, the id naming the day it was made. */
export function newKeyEntry(now = new Date()): string {
  const day = now.toISOString().slice(0, 10).replaceAll('-', '');
  return `key-${day}-${randomBytes(3).toString('hex')}:${randomBytes(32).toString('base64')}`;
}

/** Reads a keyring file, creating it with one new key (readable by this user only) when it does not exist. */
export function localKeyring(file: string): Keyring {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  if (!fs.existsSync(file)) {
    // Written whole, then linked into place: a process starting at the same moment reads either no file or this one.
    const draft = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    fs.writeFileSync(draft, `# payload encryption keys for the local stack, newest first\n${newKeyEntry()}\n`, {
      mode: 0o600,
    });
    try {
      fs.linkSync(draft, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.unlinkSync(draft);
    }
  }
  return parseKeyring(fs.readFileSync(file, 'utf8'), file);
}
