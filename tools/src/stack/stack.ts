// Brings up what is not running yet (Temporal dev server, local Stripe-compatible and SMTP
// servers, a worker) as background processes, and stops what we started.
import { Client, Connection } from '@temporalio/client';
import path from 'node:path';
import { PROJECT_ROOT } from '../../../src/config';
import type { ToolsConfig } from '../config';
import { registerSearchAttributes, workerPolling } from '../../../src/temporal/client';
import { devServerArgs } from './assembly';
import { logFile, portOpen, runningPid, startDetached, stopProcess, waitFor } from './processes';
import { findTool } from './tools';

export const SERVICES = ['worker', 'servers', 'temporal'] as const;

const log = (msg: string) => console.log(`[stack] ${msg}`);
const tsx = (file: string) => ({ command: process.execPath, args: ['--import', 'tsx', path.join(PROJECT_ROOT, file)] });

function temporalEndpoint(config: ToolsConfig): { host: string; port: number } | undefined {
  const [host, port] = config.temporal.address.split(':');
  // Only a server on this machine is ours to start; any other address must already be up.
  return ['127.0.0.1', 'localhost'].includes(host) ? { host: '127.0.0.1', port: Number(port ?? 7233) } : undefined;
}

export async function ensureTemporal(config: ToolsConfig): Promise<void> {
  const local = temporalEndpoint(config);
  if (local && !(await portOpen(local.port))) {
    const cli = findTool('temporal');
    log(
      `starting Temporal dev server (${cli}) on ${config.temporal.address}, Web UI on ${config.local.temporalUiPort}`,
    );
    const args = devServerArgs({
      port: local.port,
      uiPort: config.local.temporalUiPort,
      namespace: config.temporal.namespace,
      logLevel: 'warn',
      // The Web UI asks the stack's codec server to decode what the workers encrypted.
      codecEndpoint: config.encryption.enabled ? config.codec.endpoint : undefined,
      dbFile: path.join(config.dataDir, 'temporal.db'),
    });
    startDetached(config.dataDir, { name: 'temporal', command: cli, args, env: config.env });
    await waitFor('Temporal', () => portOpen(local.port), 60_000, logFile(config.dataDir, 'temporal'));
  }
  const connection = await Connection.connect({ ...config.temporal.connection, connectTimeout: '10s' });
  try {
    await registerSearchAttributes(connection, config.temporal.namespace, log);
  } finally {
    await connection.close();
  }
}

export async function ensureServers(config: ToolsConfig): Promise<void> {
  const ports = [
    config.local.smtpPort,
    config.local.mailboxPort,
    ...(config.stripe.local ? [config.local.stripePort] : []),
    ...(config.encryption.enabled ? [config.codec.port] : []),
  ];
  if (runningPid(config.dataDir, 'servers') !== undefined) return;
  if ((await Promise.all(ports.map((p) => portOpen(p)))).some(Boolean)) {
    throw new Error(
      `ports ${ports.join(', ')} are in use by something this stack did not start; stop it or change STRIPE_PORT / SMTP_PORT / MAILBOX_PORT / CODEC_PORT`,
    );
  }
  log(
    `starting local servers: SMTP on ${config.local.smtpPort}, mailbox API on ${config.local.mailboxPort}` +
      (config.stripe.local ? `, Stripe-compatible API on ${config.local.stripePort}` : '') +
      (config.encryption.enabled ? `, codec server on ${config.codec.port}` : ''),
  );
  startDetached(config.dataDir, { name: 'servers', ...tsx('tools/src/servers/main.ts'), env: config.env });
  const all = async () => (await Promise.all(ports.map((p) => portOpen(p)))).every(Boolean);
  await waitFor('local servers', all, 30_000, logFile(config.dataDir, 'servers'));
}

export async function ensureWorker(config: ToolsConfig): Promise<void> {
  if (runningPid(config.dataDir, 'worker') !== undefined) return;
  // A local stack's decisions go unsigned unless its environment says otherwise (docs/production.md, "Signed decisions").
  const env = { DECISIONS_UNSIGNED: 'allow', ...config.env };
  log(
    `starting a worker${env.DECISIONS_UNSIGNED === 'allow' ? ' (DECISIONS_UNSIGNED=allow: unsigned decisions accepted, for local development only)' : ''}`,
  );
  const pid = startDetached(config.dataDir, { name: 'worker', ...tsx('src/worker.ts'), env });
  const connection = await Connection.connect(config.temporal.connection);
  const client = new Client({ connection, namespace: config.temporal.namespace });
  try {
    const polling = async () => {
      if (runningPid(config.dataDir, 'worker') === undefined) {
        throw new Error(`the worker exited; see ${logFile(config.dataDir, 'worker')}`);
      }
      return workerPolling(client, config.taskQueue, pid);
    };
    await waitFor('the worker', polling, 60_000, logFile(config.dataDir, 'worker'));
  } finally {
    await connection.close();
  }
}

export async function ensureStack(config: ToolsConfig, options: { worker: boolean }): Promise<void> {
  await ensureTemporal(config);
  await ensureServers(config);
  if (options.worker) await ensureWorker(config);
}

/** Stops every process this stack started, newest layer first; returns the names stopped. */
export async function stopStack(config: ToolsConfig): Promise<string[]> {
  const stopped: string[] = [];
  for (const name of SERVICES) if (await stopProcess(config.dataDir, name)) stopped.push(name);
  return stopped;
}

export function urls(config: ToolsConfig) {
  return {
    temporal: config.temporal.address,
    webUi: `http://localhost:${config.local.temporalUiPort}/namespaces/${config.temporal.namespace}/workflows`,
    stripe: config.stripe.apiBase ?? 'https://api.stripe.com',
    smtp: config.mail.smtpUrl,
    mailbox: `${config.mail.mailboxUrl}/messages`,
    codec: config.encryption.enabled ? config.codec.endpoint : undefined,
  };
}
