// The newcomer's path: `npm run demo` twice, then `npm run stop`, on ports and a data
// directory of its own so it never touches a stack the developer is running.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { portOpen } from '../../tools/src/stack/processes';
import { findTool } from '../../tools/src/stack/tools';
import { chromium } from 'playwright-core';
import { localStackEnv } from '../helpers/stack-env';

const run = promisify(execFile);
const root = path.join(__dirname, '..', '..');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-demo-'));
const ports = { temporal: 17233, ui: 18233, stripe: 14242, smtp: 12525, mailbox: 18025, webhooks: 14343, codec: 18888 };
const env = localStackEnv(dataDir, ports);
// The workers `npm run demo` starts load the suite's bundle (test/global-setup.ts) instead of bundling the same
// sources at each start; `npm run dev` below bundles at start, as a newcomer's worker does, and is checked for it.
const bundled = process.env.TEST_WORKFLOW_BUNDLE;
const demoEnv = bundled ? { ...env, WORKFLOW_BUNDLE: bundled } : env;
const npm = (script: string) => run('npm', ['run', '--silent', script], { cwd: root, env: demoEnv, timeout: 240_000 });
const field = (out: string, name: string) => out.match(new RegExp(`^${name}\\s+(\\S+)`, 'm'))?.[1];

jest.setTimeout(300_000);

afterAll(async () => {
  await npm('stop').catch(() => undefined);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const allClosed = async () => (await Promise.all(Object.values(ports).map((p) => portOpen(p)))).every((open) => !open);

/**
 * What Temporal stores of the run is encrypted, and the Web UI, in a real browser (Debian's
 * Chromium), shows its input decoded: through the stack's codec server, with CORS for its origin.
 */
async function expectDecodedInWebUi(workflowId: string) {
  const raw = JSON.parse(
    (
      await run(findTool('temporal'), [
        'workflow',
        'show',
        '--workflow-id',
        workflowId,
        '--address',
        env.TEMPORAL_ADDRESS,
        '--output',
        'json',
      ])
    ).stdout,
  ) as {
    events: {
      workflowExecutionStartedEventAttributes?: { input: { payloads: { metadata: { encoding: string } }[] } };
    }[];
  };
  const input = raw.events[0]!.workflowExecutionStartedEventAttributes!.input.payloads[0]!;
  expect(Buffer.from(input.metadata.encoding, 'base64').toString()).toBe('binary/encrypted');

  const browser = await chromium.launch({ executablePath: findTool('chromium'), args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    const decodes: number[] = [];
    page.on('response', (res) => {
      if (res.url() === `http://127.0.0.1:${ports.codec}/decode`) decodes.push(res.status());
    });
    await page.goto(`http://localhost:${ports.ui}/namespaces/default/workflows/${workflowId}`);
    let text = '';
    for (let i = 0; i < 100 && !text.includes('"requestedBy": "demo"'); i++) {
      await page.waitForTimeout(200);
      text = await page.locator('body').innerText();
    }
    expect(text).toMatch(/Input[\s\S]*"orderId": "demo-order-1",\s*"amount": 1250,[\s\S]*"requestedBy": "demo"/);
    expect(decodes.length).toBeGreaterThan(0);
    expect(decodes.every((status) => status === 200)).toBe(true);
  } finally {
    await browser.close();
  }
}

/** `npm run dev` in the foreground: its output so far, and its exit. */
function startDev() {
  const dev = spawn('npm', ['run', '--silent', 'dev'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  dev.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  dev.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => dev.once('exit', resolve));
  return { dev, output: () => out, exited };
}

// One stack start fewer than a case per command: after the first demo is stopped, `npm run dev` brings the stack
// back from its files, and the next demos run on its worker.
test('the demo refunds once however often it runs, across restarts; npm run dev runs the worker in the foreground, quietly, demo uses it, and stop stops what either started', async () => {
  expect(await allClosed()).toBe(true);

  const first = await npm('demo');
  // A local stack: its decisions go unsigned, and it says so (docs/production.md, "Signed decisions").
  expect(first.stdout).toMatch(/\[stack\] starting a worker \(DECISIONS_UNSIGNED=allow: unsigned decisions accepted/);
  await expectDecodedInWebUi(field(first.stdout, 'workflow id')!);
  expect((await npm('stop')).stdout).toMatch(/stopped: worker, servers, temporal/);
  expect(await allClosed()).toBe(true);

  // Everything comes back from the files under DATA_DIR: the run, the provider's and the mailbox's state.
  const { dev, output, exited } = startDev();
  try {
    for (let i = 0; i < 600 && !/worker polling task queue/.test(output()); i++)
      await new Promise((r) => setTimeout(r, 200));
    expect(output()).toMatch(/worker polling task queue refunds/);
    expect(output()).toMatch(
      /^Decisions +unsigned ones accepted \(DECISIONS_UNSIGNED=allow: local development only\)$/m,
    );
    expect(output()).not.toMatch(/webpack|asset workflow-bundle|modules by path/i);

    const second = await npm('demo');
    expect(second.stdout).not.toMatch(/starting a worker/);
    const third = await npm('demo');
    const workflowId = field(first.stdout, 'workflow id');
    const refundId = field(first.stdout, 'refund id');
    const messageId = field(first.stdout, 'message id');
    expect(workflowId).toBe('refund-demo-order-1-v1');
    expect(refundId).toMatch(/^re_/);
    expect(field(first.stdout, 'order status')).toBe('partially_refunded');
    expect(field(second.stdout, 'refund id')).toBe(refundId);
    expect(field(third.stdout, 'refund id')).toBe(refundId);
    expect(third.stdout).toMatch(/1 refund\(s\) on pi_\w+ in the Stripe server's ledger; 1 message\(s\)/);

    const again = await run('npm', ['run', '--silent', 'dev'], { cwd: root, env }).catch((e: { stderr: string }) => e);
    expect((again as { stderr: string }).stderr).toMatch(/a worker of this stack is already running/);

    const ledger = (await (await fetch(`http://127.0.0.1:${ports.stripe}/_ledger`)).json()) as {
      effects: { type: string }[];
    };
    expect(ledger.effects.filter((e) => e.type === 'refund.created')).toHaveLength(1);
    const mail = (await (
      await fetch(`http://127.0.0.1:${ports.mailbox}/messages?message_id=${encodeURIComponent(messageId!)}`)
    ).json()) as {
      messages: unknown[];
    };
    expect(mail.messages).toHaveLength(1);

    const shown = await run(findTool('temporal'), [
      'workflow',
      'show',
      '--workflow-id',
      workflowId!,
      '--address',
      env.TEMPORAL_ADDRESS,
    ]);
    expect(shown.stdout).toMatch(/WorkflowExecutionCompleted/);
    const ui = (await (
      await fetch(`http://127.0.0.1:${ports.ui}/api/v1/namespaces/default/workflows/${workflowId}`)
    ).json()) as {
      workflowExecutionInfo: { status: string };
    };
    expect(ui.workflowExecutionInfo.status).toBe('WORKFLOW_EXECUTION_STATUS_COMPLETED');
    expect(first.stdout).toContain(`workflow show --workflow-id ${workflowId}`);

    expect((await npm('stop')).stdout).toMatch(/stopped: worker, servers, temporal/);
    await expect(exited).resolves.toBeDefined();
  } finally {
    if (dev.exitCode === null) dev.kill('SIGKILL');
  }
  expect(await allClosed()).toBe(true);
  expect((await npm('stop')).stdout).toMatch(/nothing of this stack was running/);
});
