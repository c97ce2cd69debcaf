// The order activities against a real SQLite store, with real competing writers and a held write lock.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createAttemptRunner } from '../../src/activities/attempt';
import { createOrderActivities } from '../../src/activities/orders';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { openStore, type OpenStoreOptions, type OrderStore } from '../../src/store';
import { activityEnv, detailsOf, failureOf } from '../helpers/activity-env';
import { DIALECTS, freshDatabase } from '../helpers/databases';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orders-activities-'));
const { run } = activityEnv();

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function orderActivities(store: OrderStore) {
  return createOrderActivities({
    store,
    attempt: createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations }),
  });
}

const apply = (operationId: string, amount: number, orderId = 'ord_1') => ({
  key: `${operationId}:update_order`,
  orderId,
  operationId,
  refundId: `re_${operationId}`,
  amount,
});

describe.each(DIALECTS)('on %s', (dialect) => {
  let url: string;
  const stores: OrderStore[] = [];
  let activities: ReturnType<typeof createOrderActivities>;

  async function open(options?: OpenStoreOptions): Promise<OrderStore> {
    const store = await openStore(url, options);
    stores.push(store);
    return store;
  }

  beforeAll(async () => {
    url = await freshDatabase(dialect, dir);
    const store = await open({ faults: true, busyTimeoutMs: 100 });
    for (const id of ['ord_1', 'ord_2', 'ord_3']) {
      await store.seedOrder({
        id,
        paymentIntentId: `pi_${id}`,
        customerEmail: 'a@example.test',
        currency: 'usd',
        amount: 1000,
      });
    }
    activities = orderActivities(store);
  });

  afterAll(async () => {
    for (const store of stores) await store.close();
  });

  it('applies, reapplies and reverts through the store, leaving an audit trail', async () => {
    const input = apply('op-1', 400);
    const first = await run(activities.applyRefund, input);
    expect(first).toMatchObject({
      refundedAmount: 400,
      changed: true,
      evidence: { attempt: 1, ledger: [expect.objectContaining({ outcome: 'ok', transportRequests: 0 })] },
    });
    await expect(run(activities.applyRefund, input)).resolves.toMatchObject({ refundedAmount: 400, changed: false });
    const revert = { orderId: 'ord_1', operationId: 'op-1', compensationKey: 'op-1:compensate' };
    await expect(run(activities.revertRefund, revert)).resolves.toMatchObject({
      refundedAmount: 0,
      status: 'paid',
      changed: true,
    });
    await expect(run(activities.revertRefund, revert)).resolves.toMatchObject({ changed: false });
    const trail = await stores[0].operations.auditTrail('op-1');
    expect(trail.map((e) => e.event)).toEqual(['order_updated', 'order_reverted']);
  });

  it('maps an unknown order to PERMANENT_BUSINESS, non-retryable', async () => {
    const failure = await failureOf(run(activities.applyRefund, apply('op-x', 1, 'ord_missing')));
    expect(failure).toMatchObject({ type: 'PERMANENT_BUSINESS', nonRetryable: true });
    expect(detailsOf(failure)).toMatchObject({
      reason: 'order_not_found',
      certainty: 'not_executed',
      operationId: 'op-x',
    });
  });

  it('maps an over-refund and a revert of an operation never applied to refusals, non-retryable', async () => {
    const over = await failureOf(run(activities.applyRefund, apply('op-2', 1001)));
    expect(over).toMatchObject({
      type: 'PERMANENT_BUSINESS',
      nonRetryable: true,
      message: expect.stringMatching(/exceeds what is left to refund/),
    });
    const never = await failureOf(
      run(activities.revertRefund, { orderId: 'ord_1', operationId: 'op-never', compensationKey: 'c' }),
    );
    expect(never).toMatchObject({ type: 'INVALID_ARGUMENTS', nonRetryable: true });
  });

  it('maps an operation id reused with other parameters to INVALID_ARGUMENTS, non-retryable', async () => {
    const failure = await failureOf(run(activities.applyRefund, { ...apply('op-1', 400), refundId: 're_other' }));
    expect(failure).toMatchObject({ type: 'INVALID_ARGUMENTS', nonRetryable: true });
  });

  it('maps a competing writer to a retryable STATE_CONFLICT, and the retry reloads and applies once', async () => {
    await stores[0].faults.add({ kind: 'conflict', orderId: 'ord_2' });
    const input = apply('op-3', 200, 'ord_2');
    const failure = await failureOf(run(activities.applyRefund, input));
    expect(failure).toMatchObject({ type: 'STATE_CONFLICT', nonRetryable: false });
    expect(detailsOf(failure)).toMatchObject({ certainty: 'not_executed', reason: 'version_conflict' });
    expect(failure.nextRetryDelay).toBeGreaterThan(0);
    // The other writer's change is kept; ours is applied on top of it, once.
    const before = await stores[0].getOrder('ord_2');
    await expect(run(activities.applyRefund, input)).resolves.toMatchObject({
      refundedAmount: 200,
      version: before!.version + 1,
      changed: true,
    });
    await expect(stores[0].faults.list()).resolves.toEqual([
      expect.objectContaining({ kind: 'conflict', remaining: 0, hits: 1 }),
    ]);
  });

  it('maps a write lock held past busy_timeout to a retryable CAPACITY, and nothing is half-written', async () => {
    await stores[0].faults.add({ kind: 'busy', orderId: 'ord_3' });
    const input = apply('op-4', 300, 'ord_3');
    const failure = await failureOf(run(activities.applyRefund, input));
    expect(failure).toMatchObject({ type: 'CAPACITY', nonRetryable: false });
    expect(detailsOf(failure)).toMatchObject({ certainty: 'not_executed', reason: 'database_busy' });
    await expect(stores[0].getOrder('ord_3')).resolves.toMatchObject({ refundedAmount: 0 });
    // The other connection lets go of the lock once our write has given up on it.
    await new Promise((r) => setTimeout(r, 700));
    await expect(run(activities.applyRefund, input)).resolves.toMatchObject({ refundedAmount: 300, changed: true });
  });

  it('arms store faults only in a store opened with faults on', async () => {
    const plain = orderActivities(await open());
    await stores[0].faults.add({ kind: 'conflict', orderId: 'ord_1' });
    await expect(run(plain.applyRefund, apply('op-5', 100))).resolves.toMatchObject({ changed: true });
    await stores[0].faults.clear();
  });
});
