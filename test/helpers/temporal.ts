// The suite's Temporal: one dev server for the whole run (test/global-setup.ts starts it), each
// test file in a namespace of its own, so that visibility queries (the sweep, the digest, lists)
// and default task queues never see another file's runs. A file run alone starts its own server.
import { Connection } from '@temporalio/client';
import { SearchAttributeType, type DataConverter } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { SEARCH_ATTRIBUTES } from '../../src/contract';
import { findTool } from '../../tools/src/stack/tools';

/** Namespaces the shared server creates at start, with the search attributes; a file claims one. */
const POOL = 48;
const poolName = (i: number) => `test-${i}`;

export interface SharedServer {
  address: string;
  /** Where files claim namespaces: one empty directory per claimed name. */
  claims: string;
  stop(): Promise<void>;
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });

/**
 * Starts the dev server the whole run shares, with every pooled namespace and our search attributes. A server
 * that exits as it starts (a port of its own taken between our check and its bind) is started again on others.
 */
export async function startSharedServer(claims: string): Promise<SharedServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startSharedServerOnce(claims);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof ServerExited)) throw err;
    }
  }
}

class ServerExited extends Error {}

async function startSharedServerOnce(claims: string): Promise<SharedServer> {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const args = [
    'server',
    'start-dev',
    '--headless',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--log-level',
    'error',
  ];
  for (let i = 1; i <= POOL; i++) args.push('--namespace', poolName(i));
  for (const key of Object.values(SEARCH_ATTRIBUTES))
    args.push('--search-attribute', `${key.name}=${key.type === SearchAttributeType.BOOL ? 'Bool' : 'Keyword'}`);
  const child: ChildProcess = spawn(findTool('temporal'), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (const end = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 200))) {
    if (child.exitCode !== null)
      throw new ServerExited(
        `the shared Temporal dev server exited (${child.exitCode}): ${stderr.trim() || 'no output'}`,
      );
    if (Date.now() > end) throw new Error('the shared Temporal dev server did not start in 60 s');
    const ready = await Connection.connect({ address, connectTimeout: '1s' })
      .then(async (c) => {
        try {
          await c.workflowService.describeNamespace({ namespace: poolName(POOL) });
          return true;
        } finally {
          await c.close();
        }
      })
      .catch(() => false);
    if (ready) break;
  }
  fs.mkdirSync(claims, { recursive: true });
  return {
    address,
    claims,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A namespace no other file of this run has: the first free one of the pool (mkdir is atomic across jest workers). */
function claimNamespace(claims: string): string {
  for (let i = 1; i <= POOL; i++) {
    try {
      fs.mkdirSync(path.join(claims, poolName(i)));
      return poolName(i);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  throw new Error(`all ${POOL} test namespaces are taken: raise POOL in test/helpers/temporal.ts`);
}

/** A Web UI on `port` that decodes payloads through the codec server at `codecEndpoint`. */
export interface WebUiOptions {
  port: number;
  codecEndpoint: string;
}

/**
 * A test environment for one file: on the shared server (TEST_TEMPORAL_ADDRESS) in a namespace of
 * its own, or, when the file runs without the global setup, on a dev server of its own. With `webUi`,
 * always a dev server of its own (the shared one is headless), its Web UI on, in namespace default.
 */
export async function testEnvironment(
  client: { dataConverter?: DataConverter } = {},
  webUi?: WebUiOptions,
): Promise<TestWorkflowEnvironment> {
  const address = process.env.TEST_TEMPORAL_ADDRESS;
  const claims = process.env.TEST_TEMPORAL_CLAIMS;
  if (address && claims && !webUi)
    return TestWorkflowEnvironment.createFromExistingServer({ address, namespace: claimNamespace(claims), client });
  return TestWorkflowEnvironment.createLocal({
    client,
    server: {
      executable: { type: 'existing-path', path: findTool('temporal') },
      searchAttributes: Object.values(SEARCH_ATTRIBUTES),
      ...(webUi && { ui: true, uiPort: webUi.port, extraArgs: ['--ui-codec-endpoint', webUi.codecEndpoint] }),
    },
  });
}

/**
 * With RECORD_HISTORY set, writes a run's history to test/histories/<name>.json for the replay suite;
 * through the codec server when payloads are encrypted, so that a recording replays without the key
 * (never execFileSync: the CLI asks this process's codec server, which must stay free to answer).
 */
export async function recordHistory(
  env: TestWorkflowEnvironment,
  workflowId: string,
  name: string,
  codecEndpoint?: string,
): Promise<void> {
  if (!process.env.RECORD_HISTORY) return;
  const args = ['workflow', 'show', '--workflow-id', workflowId, '--address', env.address];
  args.push('--namespace', env.namespace ?? 'default', '--output', 'json');
  if (codecEndpoint) args.push('--codec-endpoint', codecEndpoint);
  const { stdout } = await promisify(execFile)(findTool('temporal'), args, { maxBuffer: 64 << 20 });
  fs.writeFileSync(path.join(__dirname, '..', 'histories', `${name}.json`), stdout);
}
