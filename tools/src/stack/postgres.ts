// A PostgreSQL server of our own, on 127.0.0.1, on a data directory of its own, started with
// initdb and pg_ctl (no systemd, nothing shared with a system cluster). Used by the tests and the
// chaos stack; a real deployment points DATABASE_URL at its own server instead.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './processes';
import { findTool } from './tools';

const run = promisify(execFile);

export interface PostgresServer {
  /** A superuser URL for the server's `postgres` database. */
  readonly url: string;
  readonly dir: string;
  stop(): Promise<void>;
}

/** PostgreSQL refuses to run as root: as root, its commands run as the `postgres` user its package made. */
function asServerUser(bin: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
}

async function pgCommand(binDir: string, name: string, args: string[]): Promise<void> {
  const [file, argv] = asServerUser(path.join(binDir, name), args);
  try {
    await run(file, argv, { timeout: 60_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${name} ${args.join(' ')} failed: ${(e.stderr || e.message).trim()}`, { cause: err });
  }
}

/** Creates a cluster in a new directory and starts it; fsync is off: a test server trades durability for speed. */
export async function startPostgres(options: { port?: number } = {}): Promise<PostgresServer> {
  const binDir = findTool('postgres');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-pg-'));
  if (process.getuid?.() === 0) await run('chown', ['postgres:', dir]);
  const data = path.join(dir, 'data');
  const port = options.port ?? (await freePort());
  await pgCommand(binDir, 'initdb', [
    '-D',
    data,
    '-U',
    'postgres',
    '-A',
    'trust',
    '-E',
    'UTF8',
    '--no-sync',
    '--no-instructions',
  ]);
  const settings = `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300`;
  await pgCommand(binDir, 'pg_ctl', [
    '-D',
    data,
    '-l',
    path.join(dir, 'server.log'),
    '-o',
    settings,
    '-w',
    '-t',
    '60',
    'start',
  ]);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    dir,
    async stop() {
      await pgCommand(binDir, 'pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Creates a database of its own on the server `adminUrl` names (a test's, a chaos run's) and returns its URL. */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name))
    throw new Error(`"${name}" is not a plain database name (lower-case letters, digits, _)`);
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
