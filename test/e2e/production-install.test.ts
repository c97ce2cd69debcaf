// A production install of the product package alone: `npm run build`, then package.json,
// package-lock.json and lib/ copied to a directory of their own and installed with
// `npm ci --omit=dev --workspaces=false`. None of the tooling is there (no stand-in, no
// smtp-server, cli-progress or tsx); its `node lib/worker.js` and `node lib/cli/refund.js` carry a
// refund against a local stack the tooling starts, as `npm run dev` does.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createStripeClient } from '../../src/activities/stripe-client';
import { connectClient } from '../../src/cli/common';
import { outcomeOf } from '../../src/client/outcome';
import { seedPaidOrder } from '../../tools/src/shop/orders';
import { openStore } from '../../src/store';
import { startWorkerProcess, type WorkerProcess } from '../../tools/src/chaos/worker-process';
import { loadToolsConfig } from '../../tools/src/config';
import { freePort } from '../../tools/src/stack/processes';
import { ensureStack, stopStack } from '../../tools/src/stack/stack';
import { localStackEnv } from '../helpers/stack-env';

const run = promisify(execFile);
const root = path.join(__dirname, '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-production-'));
const app = path.join(work, 'app');
const dataDir = path.join(work, 'data');
/** What only the tooling needs: none of it may be installed with the product. */
const TOOLING = ['smtp-server', 'cli-progress', 'tsx', '@durable-refunds', 'tools'];

jest.setTimeout(20 * 60_000);

let env: NodeJS.ProcessEnv;
let worker: WorkerProcess | undefined;

afterAll(async () => {
  await worker?.stop();
  if (env) await stopStack(loadToolsConfig(env)).catch(() => undefined);
  fs.rmSync(work, { recursive: true, force: true });
});

/** Every package directory under node_modules, nested ones included (`@scope/name` for scoped ones). */
function installedPackages(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).flatMap((name) => {
    if (name.startsWith('.')) return [];
    const at = path.join(dir, name);
    if (name.startsWith('@'))
      return [
        name,
        ...fs
          .readdirSync(at)
          .flatMap((sub) => [`${name}/${sub}`, ...installedPackages(path.join(at, sub, 'node_modules'))]),
      ];
    return [name, ...installedPackages(path.join(at, 'node_modules'))];
  });
}

test('the product installs without the tooling, and its built worker carries a refund on the local stack', async () => {
  const timings: string[] = [];
  const lap = async <T>(what: string, step: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    const result = await step();
    timings.push(`${what} ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return result;
  };

  await lap('build', () => run('npm', ['run', '--silent', 'build'], { cwd: root, timeout: 600_000 }));
  fs.mkdirSync(app);
  for (const file of ['package.json', 'package-lock.json'])
    fs.copyFileSync(path.join(root, file), path.join(app, file));
  fs.cpSync(path.join(root, 'lib'), path.join(app, 'lib'), { recursive: true });
  // The workspace is left out: the product's dependencies alone, from the lock file, as a deployment installs them.
  // Without install scripts: the product needs none (better-sqlite3 13 carries its native module prebuilt, and
  // protobufjs's only checks version schemes), so the built worker below shows that too.
  await lap('npm ci --omit=dev', () =>
    run(
      'npm',
      ['ci', '--omit=dev', '--workspaces=false', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'],
      {
        cwd: app,
        timeout: 900_000,
      },
    ),
  );
  const installed = installedPackages(path.join(app, 'node_modules'));
  expect(installed).toContain('@temporalio/worker');
  expect(installed.filter((name) => TOOLING.some((t) => name === t || name.startsWith(`${t}/`)))).toEqual([]);
  expect(fs.existsSync(path.join(app, 'tools'))).toBe(false);

  const ports = {
    temporal: await freePort(),
    ui: await freePort(),
    stripe: await freePort(),
    smtp: await freePort(),
    mailbox: await freePort(),
    webhooks: await freePort(),
    codec: await freePort(),
  };
  env = localStackEnv(dataDir, ports);
  const config = loadToolsConfig(env);
  // The Temporal dev server and the stand-ins as `npm run dev` starts them; the worker is the installed one.
  await lap('stack', () => ensureStack(config, { worker: false }));
  worker = await lap('worker start', () =>
    startWorkerProcess(
      { ...env, WORKFLOW_BUNDLE: path.join(app, 'lib', 'workflow-bundle.js') },
      120_000,
      path.join(app, 'lib', 'worker.js'),
    ),
  );

  const store = await openStore(config.databaseUrl);
  const order = await seedPaidOrder(createStripeClient(config.stripe), store, {
    orderId: 'production-1',
    amount: 5000,
    currency: 'usd',
    customerEmail: 'customer@example.test',
  }).finally(() => store.close());
  const cli = await lap('refund', () =>
    run(
      process.execPath,
      [
        path.join(app, 'lib', 'cli', 'refund.js'),
        '--order',
        order.id,
        '--amount',
        '1250',
        '--requested-by',
        'production-install',
      ],
      { cwd: app, env, timeout: 120_000 },
    ),
  );
  const workflowId = cli.stdout.match(/^workflow (\S+)/m)?.[1];
  expect(workflowId).toBeDefined();

  const client = await connectClient(config);
  try {
    const outcome = await outcomeOf(client.workflow.getHandle(workflowId!));
    expect(outcome).toMatchObject({ kind: 'result', result: { status: 'completed', refund: { amount: 1250 } } });
    if (outcome.kind !== 'result' || outcome.result.status !== 'completed') return;
    // The effects where they land: one refund in the Stripe stand-in's ledger, one email in the mailbox.
    const ledger = (await (
      await fetch(`${config.stripe.apiBase}/_ledger?payment_intent=${order.paymentIntentId}`)
    ).json()) as { effects: { type: string }[] };
    expect(ledger.effects.filter((e) => e.type === 'refund.created')).toHaveLength(1);
    const mailbox = (await (
      await fetch(`${config.mail.mailboxUrl}/messages?to=${encodeURIComponent(order.customerEmail)}`)
    ).json()) as { messages: { messageId: string }[] };
    expect(mailbox.messages.map((m) => m.messageId)).toEqual([outcome.result.notification.messageId]);
    // The operator commands run from the install too, built: inspect reads the run and its evidence.
    const inspected = await run(process.execPath, [path.join(app, 'lib', 'cli', 'inspect.js'), workflowId!, '--json'], {
      cwd: app,
      env,
      timeout: 120_000,
    });
    expect(JSON.parse(inspected.stdout)).toMatchObject({
      workflowId,
      execution: 'COMPLETED',
      verdict: 'auto-retry is safe',
    });
  } finally {
    await client.connection.close();
  }
  console.log(`production install: ${timings.join(', ')}`);
});
