// The layer checker (`npm run layers`, part of `npm run lint`): the real tree passes it, and a
// small tree with one wrong-way import per rule fails it, naming each rule.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');
const CONFIG = path.join(ROOT, '.dependency-cruiser.cjs');
// The package's own `depcruise` entry: its file's name changes between majors.
const PACKAGE = path.join(ROOT, 'node_modules', 'dependency-cruiser');
const BIN = path.join(
  PACKAGE,
  (JSON.parse(fs.readFileSync(path.join(PACKAGE, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin
    .depcruise!,
);

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

const run = (cwd: string, ...extra: string[]) =>
  spawnSync(process.execPath, [BIN, 'src', 'tools/src', '--config', CONFIG, ...extra], {
    cwd,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });

/** The checker's violations, from its JSON report. */
function violations(cwd: string): Violation[] {
  const out = run(cwd, '--output-type', 'json');
  if (!out.stdout) throw new Error(`dependency-cruiser printed nothing: ${out.stderr}`);
  return (JSON.parse(out.stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

/** A src-like tree: every import in it is allowed, but for the wrong-way ones named in `bad`. */
const FILES: Record<string, string> = {
  'src/workflows/refund.ts': "export async function refundWorkflow(): Promise<string> {\n  return 'done';\n}\n",
  'src/worker.ts':
    "import { refundWorkflow } from './workflows/refund';\nexport const registered = [refundWorkflow];\n",
  'src/client/start.ts':
    "import type { refundWorkflow } from '../workflows/refund';\nexport type Started = ReturnType<typeof refundWorkflow>;\n",
  'src/domain/order.ts': 'export interface Order {\n  id: string;\n}\n',
  'src/contract/ids.ts':
    "import type { Order } from '../domain/order';\nexport const orderKey = (o: Order) => `order-${o.id}`;\n",
  'tools/src/stack/stack.ts': "export const startStack = () => 'started';\n",
  'tools/src/cli/dev.ts':
    "import { startStack } from '../stack/stack';\nimport { orderKey } from '../../../src/contract/ids';\nexport const dev = [startStack, orderKey];\n",
  'src/activities/good.ts': "import { orderKey } from '../contract/ids';\nexport const key = orderKey;\n",
};
const BAD: Record<string, { code: string; rule: string }> = {
  'src/activities/bad.ts': {
    code: "import { refundWorkflow } from '../workflows/refund';\nexport const run = refundWorkflow;\n",
    rule: 'workflows-only-from-worker',
  },
  'src/activities/client.ts': {
    code: "import type { Started } from '../client/start';\nexport type S = Started;\n",
    rule: 'activities-not-to-client',
  },
  'src/contract/bad.ts': {
    code: "import { key } from '../activities/good';\nexport const k = key;\n",
    rule: 'contract-imports-only-domain-and-reliability',
  },
  'src/codec/bad.ts': {
    code: "import { startStack } from '../../tools/src/stack/stack';\nexport const s = startStack;\n",
    rule: 'product-not-to-tooling',
  },
  'src/domain/a.ts': {
    code: "import type { B } from './b';\nexport interface A {\n  b?: B;\n}\n",
    rule: 'no-circular',
  },
  'src/domain/b.ts': {
    code: "import type { A } from './a';\nexport interface B {\n  a?: A;\n}\n",
    rule: 'no-circular',
  },
};

function tree(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'));
  for (const [file, code] of Object.entries(files)) {
    fs.mkdirSync(path.join(dir, path.dirname(file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), code);
  }
  return dir;
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

test('the real tree keeps every layer rule', () => {
  expect(violations(ROOT).map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).toEqual([]);
}, 120_000);

test('a tree of allowed imports passes: the worker value-imports workflows, a client only their types', () => {
  const dir = tree(FILES);
  dirs.push(dir);
  expect(violations(dir)).toEqual([]);
}, 60_000);

test('each wrong-way import fails the checker, naming its rule', () => {
  const dir = tree({ ...FILES, ...Object.fromEntries(Object.entries(BAD).map(([file, { code }]) => [file, code])) });
  dirs.push(dir);
  const found = violations(dir);
  // A cycle is reported once, from its first module.
  expect(found).toHaveLength(Object.keys(BAD).length - 1);
  const named = new Set(found.map((v) => `${v.rule.name} ${v.from}`));
  for (const [file, { rule }] of Object.entries(BAD))
    if (file !== 'src/domain/b.ts') expect(named).toContain(`${rule} ${file}`);
  // As `npm run layers` runs it: it fails, and says which rule each import breaks.
  const plain = run(dir);
  expect(plain.status).not.toBe(0);
  for (const { rule } of Object.values(BAD)) expect(plain.stdout).toContain(`error ${rule}:`);
}, 60_000);
