// The databases the store suite runs against: each test gets a fresh one of either kind.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createDatabase } from '../../tools/src/stack/postgres';
import type { Dialect } from '../../src/store';

export const DIALECTS: Dialect[] = ['sqlite', 'postgres'];

/** A new, empty database: a SQLite file in `dir`, or a database of its own on the run's PostgreSQL server. */
export async function freshDatabase(dialect: Dialect, dir: string): Promise<string> {
  const name = `t_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
  if (dialect === 'sqlite') return `sqlite:${path.join(dir, `${name}.db`)}`;
  const admin = process.env.TEST_POSTGRES_URL;
  if (!admin) throw new Error('TEST_POSTGRES_URL is not set: jest starts a PostgreSQL server in test/global-setup.ts');
  return createDatabase(admin, name);
}
