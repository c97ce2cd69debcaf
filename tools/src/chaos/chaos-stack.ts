// The stack a chaos run drives, all on 127.0.0.1 in a directory of its own: a Temporal dev server,
// the Stripe-compatible and SMTP servers with their fault APIs, Toxiproxy in front of Stripe, SMTP
// and the Temporal frontend, and a pool of worker processes that can be SIGKILLed and replaced.
import { refundDataConverter } from '../../../src/codec/data-converter';
import { newKeyEntry, parseKeyring } from '../../../src/codec/keyring';
import { Client, Connection } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type Stripe from 'stripe';
import { createStripeClient } from '../../../src/activities/stripe-client';
import { DEFAULT_POLICY } from '../../../src/reliability/default-policy';
import type { RecoveryPolicy } from '../../../src/reliability/policy';
import type { FaultInjector, MailServer } from '../servers/mail-server';
import type { RefundLifecycle } from '../servers/stripe/resources';
import { devServerArgs, proxyDependencies, startStandIns, type DependencyProxies } from '../stack/assembly';
import { startPostgres, createDatabase, type PostgresServer } from '../stack/postgres';
import { freePort, portOpen } from '../stack/processes';
import { findTool } from '../stack/tools';
import { openStore, type Dialect, type OrderStore } from '../../../src/store';
import { startToxiproxy, type Toxiproxy } from './toxiproxy';
import { bundleRefundWorkflows } from '../../../src/worker-pools';
import { startWorkerProcess, type WorkerProcess } from './worker-process';

/** Short timeouts and backoffs, so that a run under faults settles in seconds, not minutes. */
export const CHAOS_POLICY: RecoveryPolicy = {
  ...DEFAULT_POLICY,
  version: `${DEFAULT_POLICY.version}-chaos`,
  rules: DEFAULT_POLICY.rules.map((r) =>
    r.backoff ? { ...r, backoff: { initialMs: 200, coefficient: 2, maxMs: 2000 } } : r,
  ),
  timeouts: {
    stripe: { startToCloseMs: 5000, scheduleToCloseMs: 60_000 },
    smtp: { startToCloseMs: 10_000, scheduleToCloseMs: 60_000 },
    store: { startToCloseMs: 5000, scheduleToCloseMs: 30_000 },
  },
  // On, with a cooldown to match the short backoffs: an outage fault opens it, the next probe closes it.
  breaker: { ...DEFAULT_POLICY.breaker, cooldownMs: 2000 },
};

/**
 * The Stripe server keeps a key's answer this long, and the workers know it: far shorter than
 * Stripe's 24 hours, so that nearly every resend falls outside the window and must first be
 * proven safe by reconciliation, as a resend after a day would.
 */
export const CHAOS_KEY_TTL_MS = 3000;

export interface ChaosStack {
  dir: string;
  client: Client;
  /** The run's payload codec with its key, as the client and the workers use it. */
  dataConverter: DataConverter;
  /** What the refund workers were started with (addresses through the proxies, the key, the policy file). */
  env: NodeJS.ProcessEnv;
  /** Direct to the Stripe server (not through the proxy): for seeding and for evidence. */
  stripe: Stripe;
  stripeUrl: string;
  mail: MailServer;
  store: OrderStore;
  toxiproxy: Toxiproxy;
  proxies: DependencyProxies;
  workers: WorkerProcess[];
  /** The Temporal dev server's and Toxiproxy's processes (what the benchmark reads CPU time from). */
  pids: { temporal: number | undefined; toxiproxy: number | undefined };
  /** SIGKILLs worker `index` and starts a new one in its place. */
  replaceWorker(index: number): Promise<void>;
  /** The next refund Stripe makes kills every worker the moment it is made, before any hears of it; they are replaced. */
  killAfterNextRefund(): void;
  /** Workers killed that way. */
  readonly killedAfterRefund: number;
  close(): Promise<void>;
}

async function startTemporal(
  dir: string,
  inMemory: boolean,
  tries = 3,
): Promise<{ address: string; child: ChildProcess }> {
  const [port, uiPort] = [await freePort(), await freePort()];
  const args = devServerArgs({
    port,
    uiPort,
    headless: true,
    logLevel: 'error',
    dbFile: inMemory ? undefined : path.join(dir, 'temporal.db'),
  });
  const child = spawn(findTool('temporal'), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  for (const end = Date.now() + 60_000; !(await portOpen(port)); await new Promise((r) => setTimeout(r, 200))) {
    // A free port taken by another process before the server bound it (seen once): again, on other ports.
    if (child.exitCode !== null && tries > 1) return startTemporal(dir, inMemory, tries - 1);
    if (child.exitCode !== null || Date.now() > end)
      throw new Error(`the Temporal dev server did not start on 127.0.0.1:${port}: ${stderr.trim() || 'no output'}`);
  }
  return { address: `127.0.0.1:${port}`, child };
}

/** The order store the workers share: a SQLite file in the run's directory, or a PostgreSQL server of the run's own. */
async function startDatabase(dir: string, database: Dialect): Promise<{ url: string; server?: PostgresServer }> {
  if (database === 'sqlite') return { url: `sqlite:${path.join(dir, 'orders.db')}` };
  const server = await startPostgres();
  return { url: await createDatabase(server.url, 'chaos'), server };
}

export interface ChaosStackOptions {
  dir: string;
  /** Refund worker processes. */
  workers: number;
  database?: Dialect;
  workflowBundle?: string;
  /** The workers' recovery policy (default CHAOS_POLICY). */
  policy?: RecoveryPolicy;
  /** How long the Stripe server keeps a key's answer, and the workers know it (default CHAOS_KEY_TTL_MS). */
  idempotencyTtlMs?: number;
  lifecycle?: Partial<RefundLifecycle>;
  /** Sees every SMTP command the mail server answers (and may fail it), before the fault API's faults. */
  mailFaults?: FaultInjector;
  /** The dev server keeps its state in memory instead of a SQLite file: no disk waits in what is measured. */
  temporalInMemory?: boolean;
  /** More environment for the refund workers. */
  workerEnv?: NodeJS.ProcessEnv;
}

export async function startChaosStack(opts: ChaosStackOptions): Promise<ChaosStack> {
  const { dir } = opts;
  fs.mkdirSync(dir, { recursive: true });
  const temporal = await startTemporal(dir, opts.temporalInMemory ?? false);
  const connection = await Connection.connect({ address: temporal.address });
  // The run's own payload key, shared by its client and its worker processes.
  const payloadKeys = newKeyEntry();
  const dataConverter = refundDataConverter(parseKeyring(payloadKeys, 'chaos'));
  const client = new Client({ connection, namespace: 'default', dataConverter });
  const ttlMs = opts.idempotencyTtlMs ?? CHAOS_KEY_TTL_MS;
  let armed = false;
  let killedAfterRefund = 0;
  let afterRefund: () => Promise<void> = async () => undefined;
  const standIns = await startStandIns(dir, {
    stripe: {
      port: 0,
      faults: true,
      idempotencyTtlMs: ttlMs,
      lifecycle: opts.lifecycle,
      hooks: {
        afterEffect: async (ctx) => {
          if (!armed || ctx.method !== 'POST' || ctx.path !== '/v1/refunds' || (ctx.response?.status ?? 500) >= 300)
            return;
          armed = false;
          await afterRefund();
        },
      },
    },
    mail: { smtpPort: 0, apiPort: 0, faultApi: true, faults: opts.mailFaults },
  });
  const { stripe: stripeServer, mail } = standIns;
  const database = await startDatabase(dir, opts.database ?? 'sqlite');
  const databaseUrl = database.url;
  const store = await openStore(databaseUrl);
  const stripe = createStripeClient({ secretKey: 'sk_test_chaos', apiBase: stripeServer.url });
  const toxiproxy = await startToxiproxy();
  const proxies = await proxyDependencies(toxiproxy, {
    stripeUrl: stripeServer.url,
    smtpPort: mail.smtpPort,
    temporalAddress: temporal.address,
  });
  fs.writeFileSync(path.join(dir, 'policy.json'), JSON.stringify(opts.policy ?? CHAOS_POLICY));
  const code = opts.workflowBundle ?? (await bundleRefundWorkflows());
  fs.writeFileSync(path.join(dir, 'workflows.js'), code);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dir,
    TEMPORAL_ADDRESS: proxies.temporal.listen,
    TEMPORAL_NAMESPACE: 'default',
    DATABASE_URL: databaseUrl,
    OPERATION_SCOPE: 'chaos',
    STRIPE_SECRET_KEY: 'sk_test_chaos',
    STRIPE_API_BASE: `http://${proxies.stripe.listen}`,
    STRIPE_TIMEOUT_MS: '2000',
    // A killed worker's runs move to the others after 2 s instead of the SDK's 10 s.
    STICKY_TIMEOUT_MS: '2000',
    STRIPE_IDEMPOTENCY_TTL_HOURS: String(ttlMs / 3600_000),
    STRIPE_LIST_CONSISTENCY_MS: '500',
    SMTP_URL: `smtp://${proxies.smtp.listen}`,
    // The mailbox stands in for the provider's message log (direct, as a provider's API is another host).
    MAIL_LOG_URL: mail.apiUrl,
    MAIL_LOG_CONSISTENCY_MS: '500',
    RECOVERY_POLICY_FILE: path.join(dir, 'policy.json'),
    WORKFLOW_BUNDLE: path.join(dir, 'workflows.js'),
    WEBHOOKS: 'off',
    FAULT_INJECTION: 'off',
    PAYLOAD_KEYS: payloadKeys,
    ...opts.workerEnv,
  };
  const workers = await Promise.all(Array.from({ length: opts.workers }, () => startWorkerProcess(env)));
  // One replacement at a time: two for the same slot at once would leave a worker nobody stops.
  let replacing = Promise.resolve();
  // Once the stack closes, no replacement starts: one started after close() read the list would run on, unstopped.
  let closing = false;
  const replace = (index: number) => (replacing = replacing.catch(() => undefined).then(() => replaceNow(index)));
  const replaceNow = async (index: number) => {
    await workers[index]!.kill();
    if (closing) return;
    // The frontend may be down (a fault): a new worker that cannot reach it is tried again until one polls.
    for (let attempt = 1; ; attempt++) {
      try {
        workers[index] = await startWorkerProcess(env);
        return;
      } catch (err) {
        if (attempt >= 10) throw err;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  };
  afterRefund = async () => {
    // Every worker dies before the answer leaves: whichever sent the request never saves its receipt.
    await Promise.all(workers.map((w) => w.kill()));
    killedAfterRefund += workers.length;
    void Promise.all(workers.map((_, i) => replace(i))).catch(() => undefined);
  };
  return {
    dir,
    client,
    dataConverter,
    env,
    stripe,
    stripeUrl: stripeServer.url,
    mail,
    store,
    toxiproxy,
    proxies,
    workers,
    get pids() {
      // Read each time: Toxiproxy is started again after a crash.
      return { temporal: temporal.child.pid, toxiproxy: toxiproxy.pid };
    },
    replaceWorker: replace,
    killAfterNextRefund() {
      armed = true;
    },
    get killedAfterRefund() {
      return killedAfterRefund;
    },
    async close() {
      closing = true;
      await replacing.catch(() => undefined);
      const stopping = Promise.all(workers.map((w) => w.stop().catch(() => w.kill())));
      // A call the Temporal client is still retrying fires its next try within 6 s (5 s at most,
      // plus jitter), already cancelled; closing the channel before that would make the timer throw.
      await Promise.all([stopping, new Promise((r) => setTimeout(r, 6500))]);
      await toxiproxy.close();
      await connection.close();
      await store.close();
      await database.server?.stop();
      await standIns.close();
      const exited = new Promise((r) => temporal.child.once('exit', r));
      temporal.child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Reads one of the stack's servers' own APIs (the Stripe server's ledger and requests, the mailbox). */
export async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return (await res.json()) as T;
}
