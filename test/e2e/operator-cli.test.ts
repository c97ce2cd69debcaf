// The refund and operations commands against a Temporal server with no worker at first: the
// refund command says so instead of waiting in silence, and a conflict names the next free version.
// decide, run by a script, must say which parking it answers before it reads anything.
import { newKeyEntry } from '../../src/codec/keyring';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { testEnvironment } from '../helpers/temporal';
import { nodeArgs } from '../helpers/compiled';

const run = promisify(execFile);
let env: TestWorkflowEnvironment;
const payloadKeys = newKeyEntry();
const cliEnv = () => ({
  ...process.env,
  TEMPORAL_ADDRESS: env.address,
  TEMPORAL_NAMESPACE: env.namespace,
  USER: 'tester',
  PAYLOAD_KEYS: payloadKeys,
});
const cli = (script: string, args: string[]) =>
  run(process.execPath, nodeArgs(`cli/${script}`, ...args), { env: cliEnv() });

beforeAll(async () => {
  // The suite's dev server, in a namespace of this file's own, where no worker polls.
  env = await testEnvironment();
});
afterAll(async () => {
  await env?.teardown();
});

test('with no worker polling, the refund command says so and how to start one', async () => {
  const child = spawn(process.execPath, nodeArgs('cli/refund.ts', '--order', 'cli-1', '--amount', '100'), {
    env: cliEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    for (let i = 0; i < 150 && !/no worker is polling/.test(stderr); i++) await new Promise((r) => setTimeout(r, 200));
    expect(stderr).toMatch(/no worker is polling task queue "refunds" .*start one with `npm start`/);
  } finally {
    child.kill();
  }
});

test('a changed refund under a used version names the next free one, and operations lists the runs', async () => {
  await cli('refund.ts', ['--order', 'cli-2', '--amount', '100', '--no-wait']);
  await cli('refund.ts', ['--order', 'cli-2', '--amount', '100', '--operation-version', '3', '--no-wait']);
  const conflict = await cli('refund.ts', ['--order', 'cli-2', '--amount', '200', '--no-wait']).catch(
    (e: { code: number; stderr: string }) => e,
  );
  expect(conflict).toMatchObject({ code: 2 });
  expect((conflict as { stderr: string }).stderr).toMatch(/the next free one is 4 \(--operation-version 4\)/);

  // Visibility is eventually consistent: give it a moment to list both runs.
  let listed = { runs: [] as { workflowId: string; operationVersion: number }[], nextOperationVersion: 0 };
  for (let i = 0; i < 50 && listed.runs.length < 2; i++) {
    listed = JSON.parse((await cli('operations.ts', ['cli-2', '--json'])).stdout);
    if (listed.runs.length < 2) await new Promise((r) => setTimeout(r, 200));
  }
  expect(listed.runs.map((r) => [r.workflowId, r.operationVersion])).toEqual([
    ['refund-cli-2-v1', 1],
    ['refund-cli-2-v3', 3],
  ]);
  expect(listed.nextOperationVersion).toBe(4);
  const table = await cli('operations.ts', ['cli-2']);
  expect(table.stdout).toMatch(/next free operation version: 4/);
});

test('currency is taken in any case', async () => {
  const { stdout } = await cli('refund.ts', ['--order', 'cli-3', '--amount', '100', '--currency', 'EUR', '--no-wait']);
  expect(stdout).toMatch(/workflow refund-cli-3-v1/);
});

test('TASK_QUEUE routes the refund to that queue, and the command looks for a worker there', async () => {
  const child = spawn(process.execPath, nodeArgs('cli/refund.ts', '--order', 'cli-eu', '--amount', '100'), {
    env: { ...cliEnv(), TASK_QUEUE: 'refunds-eu' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    for (let i = 0; i < 150 && !/no worker is polling/.test(stderr); i++) await new Promise((r) => setTimeout(r, 200));
    expect(stderr).toMatch(/no worker is polling task queue "refunds-eu"/);
    const described = await env.client.workflow.getHandle('refund-cli-eu-v1').describe();
    expect(described.taskQueue).toBe('refunds-eu');
    // decide looks for a worker where the run is, whatever this shell's TASK_QUEUE says.
    const args = ['refund-cli-eu-v1', 'abandon', '--current', '--by', 'ops', '--reason', 'as read'];
    await expect(cli('decide.ts', args)).rejects.toMatchObject({
      stderr: expect.stringMatching(/no worker is polling task queue "refunds-eu"/),
    });
  } finally {
    child.kill();
  }
});

test('decide in a script must name the parking it answers (--answers) or say --current; refused before anything is read', async () => {
  const decide = (...args: string[]) =>
    cli('decide.ts', ['refund-cli-4-v1', 'abandon', '--by', 'ops', '--reason', 'as read', ...args]).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
  const unnamed = await decide();
  expect(unnamed).toMatchObject({
    code: 2,
    stderr: expect.stringMatching(
      /^decide: which parking does this decision answer\? Without a terminal to confirm on, pass --answers <address> .*or --current to answer whatever the run waits for now; nothing was sent/,
    ),
  });
  // Refused before connecting: no worker polls this namespace, and it did not get as far as saying so.
  expect(unnamed.stderr).not.toMatch(/no worker is polling/);
  expect(await decide('--answers', 'the one I read')).toMatchObject({
    code: 1,
    stderr: expect.stringMatching(
      /--answers <address>' argument 'the one I read' is invalid. must be a parking's address as `npm run inspect -- <workflow id>` prints it/,
    ),
  });
  const address = 'run-0193-abc:parked-2026-01-01T00:00:00.000Z:after-0';
  expect(await decide('--answers', address, '--current')).toMatchObject({
    code: 1,
    stderr: expect.stringMatching(/option '--answers <address>' cannot be used with option '--current'/),
  });
});
