// SHA-256 for ids built in workflow code too, where node:crypto is not available (noble's, in plain JavaScript).
import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';

/** The SHA-256 of `text` (UTF-8), as lowercase hex. */
export const sha256Hex = (text: string): string => bytesToHex(sha256(utf8ToBytes(text)));
