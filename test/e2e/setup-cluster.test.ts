// A Temporal server we did not start, reached through a temporal.toml profile (no TEMPORAL_ADDRESS),
// as a team pointing the project at its own cluster would: the worker refuses to start while the
// namespace lacks our search attributes, `npm run setup-cluster` registers them once, and the
// TLS setting is honoured.
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { findTool } from '../../tools/src/stack/tools';
import { nodeArgs } from '../helpers/compiled';

const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'setup-cluster-'));
let env: TestWorkflowEnvironment;

/** The environment a newcomer's shell would have: a profile file, no TEMPORAL_* variables. */
function profileEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TEMPORAL_')));
  return {
    ...clean,
    TEMPORAL_CONFIG_FILE: path.join(dir, 'temporal.toml'),
    TEMPORAL_PROFILE: 'team',
    DATA_DIR: dir,
    ...extra,
  };
}

async function script(file: string, args: string[], extra?: Record<string, string>) {
  return run(process.execPath, nodeArgs(file, ...args), {
    env: profileEnv(extra),
    timeout: 60_000,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({
      code: err.code,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );
}

beforeAll(async () => {
  // No search attributes registered: a cluster as a team's operators hand it over.
  env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: findTool('temporal') } },
  });
  fs.writeFileSync(
    path.join(dir, 'temporal.toml'),
    `[profile.team]\naddress = "${env.address}"\nnamespace = "default"\n`,
  );
});

afterAll(async () => {
  await env?.teardown();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('the worker refuses to start without the search attributes and names the command that adds them', async () => {
  const worker = await script('worker.ts', []);
  expect(worker.code).not.toBe(0);
  expect(worker.stderr).toMatch(
    new RegExp(`namespace default on ${env.address} lacks the search attributes RefundOrderId.*npm run setup-cluster`),
  );
});

test('setup-cluster registers them once; a second run changes nothing', async () => {
  const first = await script('cli/setup-cluster.ts', []);
  expect(first).toMatchObject({ code: 0 });
  expect(first.stdout).toMatch(
    new RegExp(
      `namespace default on ${env.address}: registered RefundOrderId, .*RefundFollowUpOf; all 7 search attributes are in place`,
    ),
  );
  const second = await script('cli/setup-cluster.ts', []);
  expect(second.stdout).toMatch(/already has all 7 search attributes/);
  const { customAttributes } = await env.connection.operatorService.listSearchAttributes({ namespace: 'default' });
  expect(Object.keys(customAttributes ?? {})).toEqual(
    expect.arrayContaining(['RefundOrderId', 'RefundNeedsAttention', 'RefundFollowUpOf']),
  );
});

test('TEMPORAL_TLS is honoured: TLS against a plaintext server fails with what to check', async () => {
  const tls = await script('cli/setup-cluster.ts', [], { TEMPORAL_TLS: 'true' });
  expect(tls.code).not.toBe(0);
  expect(tls.stderr).toMatch(
    new RegExp(
      `setup-cluster: cannot reach Temporal at ${env.address} .*check TEMPORAL_ADDRESS, TEMPORAL_PROFILE and the TLS / API key settings`,
    ),
  );
});
