// A batch occurrence of refunds of different orders, through the worker on PostgreSQL (issue 34, item 5):
// no refund's order update may fail for a "competing writer" that does not exist. The attempt ledger
// says how each update_order attempt ended; the store's own count says how many transactions it ran again.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { TASK_QUEUE } from '../../src/contract';
import type { BatchResult } from '../../src/workflows';
import { freshDatabase } from '../helpers/databases';
import { startHarness, type Harness } from '../helpers/harness';

const REFUNDS = 100;
/** How long the batch's runs get to end; about 15 s here once no update conflicts. */
const WAIT_MS = 60_000;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'batch-pg-'));
const counted = { retries: 0 };
let databaseUrl: string;
let h: Harness;

beforeAll(async () => {
  databaseUrl = await freshDatabase('postgres', dir);
  h = await startHarness({
    databaseUrl,
    storeObserver: {
      statement: () => undefined,
      commit: () => undefined,
      serializationRetry: () => void counted.retries++,
    },
  });
});

afterAll(async () => {
  await h?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function query<T>(text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

test(`a batch of ${REFUNDS} refunds of different orders completes with no order update failing on a version conflict`, async () => {
  const orders = [];
  for (let i = 0; i < REFUNDS; i += 10)
    orders.push(
      ...(await Promise.all(Array.from({ length: 10 }, () => h.seedOrder(`ord_${randomUUID().slice(0, 8)}`)))),
    );
  for (const o of orders)
    await h.store.queue.enqueue(
      {
        orderId: o.id,
        amount: 1250,
        currency: 'usd',
        reason: 'requested_by_customer',
        requestedBy: 'test',
        operationVersion: 1,
      },
      'test',
    );
  // Statistics as autovacuum gathers them on a young database: small tables the planner would rather scan whole.
  await query('ANALYZE');
  counted.retries = 0; // the seeding's own are not the batch's

  const started = Date.now();
  const batch = (await h.env.client.workflow.execute('batchRefundsWorkflow', {
    taskQueue: TASK_QUEUE,
    workflowId: `batch-${randomUUID()}`,
    args: [{ limit: REFUNDS }],
  })) as BatchResult;
  expect(batch.started).toHaveLength(REFUNDS);
  // Bounded: a run that parks (its update_order out of attempts) would wait for a person for ever.
  let timer!: NodeJS.Timeout;
  const deadline = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('not ended'), WAIT_MS)));
  const statuses = await Promise.all(
    batch.started.map((id) =>
      Promise.race([
        h.env.client.workflow
          .getHandle(id)
          .result()
          .then((r) => (r as { status: string }).status),
        deadline,
      ]),
    ),
  );
  clearTimeout(timer);
  const tookMs = Date.now() - started;

  // Every update_order attempt of the batch, by how it ended: one each, and none a STATE_CONFLICT.
  const attempts = await query<{ outcome: string; reason: string | null; n: number }>(
    `SELECT outcome, reason, count(*)::int AS n FROM attempts WHERE step = 'update_order' GROUP BY outcome, reason ORDER BY n DESC`,
  );
  expect(attempts).toEqual([{ outcome: 'ok', reason: null, n: REFUNDS }]);
  expect(statuses.filter((s) => s !== 'completed')).toEqual([]);
  console.log(
    `${REFUNDS} refunds through the worker on PostgreSQL in ${tookMs} ms: ${counted.retries} store transactions run again after a serialization failure`,
  );
});
