// Bad input at the command line is refused before anything connects or starts.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { nodeArgs } from '../helpers/compiled';

const run = promisify(execFile);
// Nothing listens here: a request that got as far as connecting would fail differently.
const env = { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1', USER: 'tester' };

async function refundCli(
  args: string[],
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stderr: string; stdout: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, nodeArgs('cli/refund.ts', ...args), {
      env: { ...env, ...extraEnv },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test.each([
  [['--order', 'o1', '--amount', 'abc'], /--amount must be a whole number, got "abc"/],
  [['--order', 'o1', '--amount', '0'], /amount: must be greater than 0/],
  [['--order', 'o 1', '--amount', '10'], /orderId: must be 1-64 letters/],
  [['--order', 'o1', '--amount', '10', '--currency', 'dollars'], /currency: must be a three-letter ISO code/],
  [['--order', 'o1', '--amount', '10', '--reason', 'whim'], /reason/],
  [['--amount', '10'], /required option '--order <id>' not specified/],
])('refund %j is refused with a message naming the problem', async (args, message) => {
  const { code, stderr } = await refundCli(args);
  expect(code).not.toBe(0);
  expect(stderr).toMatch(message);
  expect(stderr).not.toMatch(/cannot reach Temporal/);
});

test('a valid request with no stack running says how to start one', async () => {
  const { code, stderr } = await refundCli(['--order', 'o1', '--amount', '10']);
  expect(code).toBe(1);
  expect(stderr).toMatch(/cannot reach Temporal at 127\.0\.0\.1:1.*npm run dev/);
});

test('without $USER, who asked must be given', async () => {
  const { code, stderr } = await refundCli(['--order', 'o1', '--amount', '10'], { USER: undefined });
  expect(code).toBe(2);
  expect(stderr).toMatch(/--requested-by is required when \$USER is not set/);
});

test('--help lists the options', async () => {
  const { code, stdout } = await refundCli(['--help']);
  expect(code).toBe(0);
  expect(stdout).toMatch(/--operation-version/);
});
