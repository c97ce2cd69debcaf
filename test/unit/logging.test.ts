// The worker's log lines are written to stdout asynchronously: when the process exits (the drain ends in
// process.exit), none is lost, even with a reader slower than the writer (a log shipper behind a pipe), and they
// arrive in the order they were logged.
import { spawn } from 'node:child_process';
import { scriptPath } from '../helpers/compiled';

test('every line logged reaches a stalled stdout, in order, when the process exits at once', async () => {
  const logging = scriptPath('observability/logging.ts');
  const lines = 20_000;
  const child = [
    `const logger = require(${JSON.stringify(logging)}).createLogger('info');`,
    `for (let i = 0; i < ${lines}; i++) logger.info('line ' + i + ' ' + 'x'.repeat(200));`,
    `process.exit(0);`,
  ].join('\n');
  const proc = spawn(process.execPath, [...(logging.endsWith('.ts') ? ['--import', 'tsx'] : []), '-e', child], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Nothing read for a while: the pipe fills, and the writes wait on it.
  proc.stdout.pause();
  await new Promise((r) => setTimeout(r, 300));
  const chunks: Buffer[] = [];
  proc.stdout.on('data', (c: Buffer) => chunks.push(c));
  proc.stdout.resume();
  expect(await new Promise((resolve) => proc.on('close', resolve))).toBe(0);
  const messages = Buffer.concat(chunks)
    .toString()
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { msg: string }).msg);
  expect(messages).toHaveLength(lines);
  expect(messages.every((m, i) => m.startsWith(`line ${i} `))).toBe(true);
});
