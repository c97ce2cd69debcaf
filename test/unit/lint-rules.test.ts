// The lint rules that guard correctness, not style: they must keep firing.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const NODE_IMPORTS =
  "import fs from 'node:fs';\nimport { randomUUID } from 'crypto';\nexport const x = [fs, randomUUID];\n";
const FLOATING = 'async function send(): Promise<void> {}\nexport function go(): void {\n  send();\n}\n';
const cases = [
  { code: NODE_IMPORTS, file: 'src/workflows/refund/workflow.ts' },
  { code: NODE_IMPORTS, file: 'src/activities/create-refund.ts' },
  { code: FLOATING, file: 'src/worker.ts' },
];

// One ESLint process for every case: its type-aware rules load the TypeScript project once, not per case.
const LINT = `
const { ESLint } = require('eslint');
let input = '';
process.stdin.on('data', (d) => (input += d)).on('end', async () => {
  const eslint = new ESLint();
  const out = [];
  for (const c of JSON.parse(input)) {
    const [result] = await eslint.lintText(c.code, { filePath: c.file });
    out.push(result.messages.map((m) => m.ruleId ?? '(fatal: ' + m.message + ')'));
  }
  process.stdout.write(JSON.stringify(out));
});`;

let hits: string[][];
beforeAll(() => {
  const out = spawnSync(process.execPath, ['-e', LINT], {
    cwd: path.join(__dirname, '..', '..'),
    input: JSON.stringify(cases),
    encoding: 'utf8',
  });
  if (out.status !== 0) throw new Error(`eslint failed: ${out.stderr}`);
  hits = JSON.parse(out.stdout) as string[][];
});

test('workflow code may not import Node built-ins', () => {
  expect(hits[0]).toEqual(['no-restricted-imports', 'no-restricted-imports']);
  expect(hits[1]).toEqual([]);
});

test('an un-awaited promise is an error', () => {
  expect(hits[2]).toContain('@typescript-eslint/no-floating-promises');
});
