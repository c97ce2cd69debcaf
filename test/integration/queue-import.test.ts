// Queueing refund requests for the batch schedule: a CSV with bad rows imports the good ones and
// reports each bad one by line and field; the CLIs say the same.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { importCsv } from '../../src/queue/csv-import';
import { openStore, type OrderStore } from '../../src/store';
import { nodeArgs } from '../helpers/compiled';

const execFileAsync = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'queue-'));
const databaseUrl = `sqlite:${path.join(dir, 'orders.db')}`;
let store: OrderStore;

beforeAll(async () => {
  store = await openStore(databaseUrl);
  for (const id of ['ord_a', 'ord_b', 'ord_c'])
    await store.seedOrder({
      id,
      paymentIntentId: `pi_${id}`,
      customerEmail: `${id}@example.test`,
      currency: 'usd',
      amount: 5000,
    });
});
afterAll(() => store.close());

const CSV = [
  'order_id,amount,currency,reason,requested_by,operation_version', // line 1
  'ord_a,1250,usd,requested_by_customer,alice,1', // 2: good
  'ord_b,12.50,usd,,alice,', // 3: amount not whole
  'ord_nope,100,usd,,alice,', // 4: unknown order
  'ord_c,100,eur,,alice,', // 5: another currency than the order's
  'ord_c,6000,,,alice,', // 6: more than is left
  'ord_c,100,usd,because,alice,', // 7: bad reason
  '', // 8: blank, skipped
  'ord_a,1250,USD,requested_by_customer,alice,1', // 9: the same as line 2
  'ord_a,999,usd,,alice,1', // 10: a changed intent under line 2's version
  'ord_b,700,,duplicate,,2', // 11: good, requested_by from the importer, currency from the order
  'ord_b,100,usd,,alice,3,extra', // 12: one field too many
  'ord_a,4000,usd,,alice,2', // 13: more than is left once line 2's 1250 is counted
].join('\n');

test('a CSV with bad rows imports the good ones and reports each bad one by line and field', async () => {
  const report = await importCsv(store, CSV, { source: 'refunds.csv', requestedBy: 'importer' });
  const byLine = Object.fromEntries(report.map((r) => [r.line, r]));
  expect(report.map((r) => r.line)).toEqual([2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13]);
  expect(byLine[2]).toMatchObject({ status: 'queued', orderId: 'ord_a', operationVersion: 1 });
  expect(byLine[3]).toMatchObject({
    status: 'refused',
    problems: [{ field: 'amount', message: 'must be a whole number of minor units (1250 for 12.50), got "12.50"' }],
  });
  expect(byLine[4]).toMatchObject({
    status: 'refused',
    problems: [{ field: 'order_id', message: 'no order ord_nope in the store' }],
  });
  expect(byLine[5]).toMatchObject({
    status: 'refused',
    problems: [{ field: 'currency', message: 'the order is in usd' }],
  });
  expect(byLine[6]).toMatchObject({
    status: 'refused',
    problems: [{ field: 'amount', message: expect.stringMatching(/more than the 5000 usd left/) }],
  });
  expect(byLine[7]).toMatchObject({ status: 'refused', problems: [{ field: 'reason' }] });
  expect(byLine[9]).toMatchObject({ status: 'already queued', orderId: 'ord_a' });
  expect(byLine[10]).toMatchObject({
    status: 'refused',
    problems: [{ field: 'operation_version', message: expect.stringMatching(/already queued with amount 1250/) }],
  });
  expect(byLine[11]).toMatchObject({ status: 'queued', orderId: 'ord_b', operationVersion: 2 });
  expect(byLine[12]).toMatchObject({
    status: 'refused',
    problems: [{ field: '(row)', message: 'has 7 field(s); the header has 6' }],
  });
  expect(byLine[13]).toMatchObject({
    status: 'refused',
    problems: [
      {
        field: 'amount',
        message: 'more than the 3750 usd left to refund on order ord_a once the 1250 already queued is counted',
      },
    ],
  });

  const queued = await store.queue.list();
  expect(queued.map((q) => [q.request.orderId, q.request.amount, q.request.requestedBy, q.source])).toEqual([
    ['ord_a', 1250, 'alice', 'refunds.csv:2'],
    ['ord_b', 700, 'importer', 'refunds.csv:11'],
  ]);
});

test('the queue CLI reports each row, exits 3 when any was refused, and refuses a file that is not ours', async () => {
  const file = path.join(dir, 'more.csv');
  fs.writeFileSync(file, 'order_id,amount\nord_c,300\nord_c,-1\n');
  const env = { ...process.env, DATABASE_URL: databaseUrl, USER: 'cli-user' };
  const cli = (script: string, ...args: string[]) =>
    execFileAsync(process.execPath, nodeArgs(`cli/${script}`, ...args), { encoding: 'utf8', env });
  const run = (...args: string[]) =>
    cli('queue.ts', ...args).then(
      (r) => ({ code: 0, ...r }),
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
  const imported = await run('import', file);
  expect(imported.code).toBe(3);
  expect(imported.stdout).toMatch(/line 2: queued: order ord_c v1/);
  expect(imported.stdout).toMatch(
    /line 3: refused: amount: must be a whole number of minor units \(1250 for 12.50\), got "-1"/,
  );

  const wrong = path.join(dir, 'wrong.csv');
  fs.writeFileSync(wrong, 'order,amount\nord_c,1\n');
  const refused = await run('import', wrong);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/unknown column\(s\) order; the columns are order_id, amount/);

  const listed = await run('list', '--status', 'queued');
  expect(listed.stdout).toMatch(/order ord_c v1 300 usd \(more.csv:2\): queued/);

  const queued = await cli('refund.ts', '--order', 'ord_c', '--amount', '200', '--operation-version', '2', '--queue');
  expect(queued.stdout).toMatch(/^queued: request #\d+, order ord_c v2/);
});
