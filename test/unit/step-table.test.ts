// The docs' table of the refund saga's steps is the one its definitions render: it cannot drift from them.
import fs from 'node:fs';
import path from 'node:path';
import { REFUND_SAGA } from '../../src/compensations/registry';
import { stepTable } from '../helpers/step-table';

const DOC = path.join(__dirname, '..', '..', 'docs', 'reliability.md');
const SECTION = /(<!-- steps:refund -->\n)[\s\S]*?(<!-- \/steps -->)/;

test('docs/reliability.md holds the table the step definitions render', () => {
  const text = fs.readFileSync(DOC, 'utf8');
  const rendered = text.replace(SECTION, `$1${stepTable(REFUND_SAGA)}\n$2`);
  if (process.env.UPDATE_DOCS) fs.writeFileSync(DOC, rendered);
  expect(text).toMatch(SECTION);
  expect(text).toBe(rendered);
});

test('the table says where each step runs, what it calls and how it is undone', () => {
  const table = stepTable(REFUND_SAGA);
  expect(table).toContain('| `load_order` |');
  expect(table).toMatch(/`beginOperation` \(write, local\)/);
  expect(table).toMatch(
    /`createRefund` \(send, effects pool\) \| stripe \| `<operation>:create_refund` \| forward repair \| \*\*yes\*\*/,
  );
  expect(table).toMatch(/`revertRefund` under `<operation>:update_order:compensate`/);
});
