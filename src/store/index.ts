import fs from 'node:fs';
import path from 'node:path';
import { SqliteOrderStore, type SqliteOrderStoreOptions } from './sqlite-store';
import type { OrderStore } from './types';

export * from './types';
export * from './errors';
export { SqliteOrderStore, type SqliteOrderStoreOptions } from './sqlite-store';

const ACCEPTED_FORMS = '"sqlite:/absolute/path.db", "sqlite:relative/path.db" or "sqlite::memory:"';

/** Opens the store a DATABASE_URL names; relative SQLite paths resolve against the working directory. */
export function openStore(databaseUrl: string, options: SqliteOrderStoreOptions = {}): OrderStore {
  if (/^postgres(ql)?:\/\//i.test(databaseUrl)) {
    throw new Error(`PostgreSQL is not supported yet (DATABASE_URL=${redact(databaseUrl)}); use ${ACCEPTED_FORMS}`);
  }
  if (!databaseUrl.startsWith('sqlite:')) {
    throw new Error(`unsupported DATABASE_URL "${redact(databaseUrl)}": expected ${ACCEPTED_FORMS}`);
  }
  const location = databaseUrl.slice('sqlite:'.length);
  if (location === ':memory:') return new SqliteOrderStore(':memory:', options);
  // "sqlite://host/..." would be read as a path starting with "//", which is never what was meant.
  if (location === '' || location.startsWith('//')) {
    throw new Error(`DATABASE_URL "${databaseUrl}" names no usable SQLite file: expected ${ACCEPTED_FORMS}`);
  }
  const file = path.resolve(location);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  return new SqliteOrderStore(file, options);
}

/** Keeps credentials of a server URL out of error messages and logs. */
function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}
