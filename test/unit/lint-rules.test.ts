// The lint rules that guard correctness, not style: they must keep firing.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const root = path.join(__dirname, '..', '..');

function rulesHit(code: string, file: string): string[] {
  const eslint = path.join(root, 'node_modules', '.bin', 'eslint');
  const out = spawnSync(eslint, ['--stdin', '--stdin-filename', file, '--format', 'json'], { cwd: root, input: code, encoding: 'utf8' });
  return (JSON.parse(out.stdout) as { messages: { ruleId: string }[] }[])[0].messages.map((m) => m.ruleId);
}

test('workflow code may not import Node built-ins', () => {
  const code = "import fs from 'node:fs';\nimport { randomUUID } from 'crypto';\nexport const x = [fs, randomUUID];\n";
  expect(rulesHit(code, 'src/workflows/refund.ts')).toEqual(['no-restricted-imports', 'no-restricted-imports']);
  expect(rulesHit(code, 'src/activities/payments.ts')).toEqual([]);
});

test('an un-awaited promise is an error', () => {
  const code = 'async function send(): Promise<void> {}\nexport function go(): void {\n  send();\n}\n';
  expect(rulesHit(code, 'src/worker.ts')).toContain('@typescript-eslint/no-floating-promises');
});
