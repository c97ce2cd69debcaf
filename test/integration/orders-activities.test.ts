import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createOrderActivities } from '../../src/activities/orders';
import { FailureType } from '../../src/reliability/failures';
import { SqliteOrderStore } from '../../src/store';
import { activityEnv, failureOf } from '../helpers/activity-env';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orders-activities-'));
const { run } = activityEnv();
const stores: SqliteOrderStore[] = [];
let activities: ReturnType<typeof createOrderActivities>;

function open(options?: ConstructorParameters<typeof SqliteOrderStore>[1]): SqliteOrderStore {
  const store = new SqliteOrderStore(path.join(dir, 'orders.db'), options);
  stores.push(store);
  return store;
}

beforeAll(async () => {
  const store = open();
  await store.seedOrder({ id: 'ord_1', paymentIntentId: 'pi_1', customerEmail: 'a@example.test', currency: 'usd', amount: 1000 });
  activities = createOrderActivities(store);
});

afterAll(async () => {
  for (const store of stores) await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('applies, reapplies and reverts through the store', async () => {
  await expect(run(activities.getOrder, 'ord_1')).resolves.toMatchObject({ id: 'ord_1', status: 'paid', version: 1 });
  const input = { orderId: 'ord_1', operationId: 'op-1', refundId: 're_1', amount: 400 };
  await expect(run(activities.applyRefund, input)).resolves.toMatchObject({ refundedAmount: 400, changed: true });
  await expect(run(activities.applyRefund, input)).resolves.toMatchObject({ refundedAmount: 400, changed: false });
  const revert = { orderId: 'ord_1', operationId: 'op-1', compensationKey: 'op-1:compensate' };
  await expect(run(activities.revertRefund, revert)).resolves.toMatchObject({ refundedAmount: 0, status: 'paid', changed: true });
  await expect(run(activities.revertRefund, revert)).resolves.toMatchObject({ changed: false });
});

it('maps an unknown order to ORDER_NOT_FOUND, non-retryable', async () => {
  await expect(failureOf(run(activities.getOrder, 'ord_missing'))).resolves.toMatchObject({ type: FailureType.OrderNotFound, nonRetryable: true });
  const failure = await failureOf(run(activities.applyRefund, { orderId: 'ord_missing', operationId: 'op-x', refundId: 're_x', amount: 1 }));
  expect(failure).toMatchObject({ type: FailureType.OrderNotFound, nonRetryable: true, details: [{ orderId: 'ord_missing', operationId: 'op-x' }] });
});

it('maps an over-refund and a revert of an operation never applied to INVALID_INPUT, non-retryable', async () => {
  const over = await failureOf(run(activities.applyRefund, { orderId: 'ord_1', operationId: 'op-2', refundId: 're_2', amount: 1001 }));
  expect(over).toMatchObject({ type: FailureType.InvalidInput, nonRetryable: true });
  expect(over.message).toMatch(/exceeds what is left to refund/);
  const never = await failureOf(run(activities.revertRefund, { orderId: 'ord_1', operationId: 'op-never', compensationKey: 'c' }));
  expect(never).toMatchObject({ type: FailureType.InvalidInput, nonRetryable: true });
});

it('maps an operation id reused with other parameters to IDEMPOTENCY_KEY_REUSED, non-retryable', async () => {
  const failure = await failureOf(run(activities.applyRefund, { orderId: 'ord_1', operationId: 'op-1', refundId: 're_other', amount: 400 }));
  expect(failure).toMatchObject({ type: FailureType.IdempotencyKeyReused, nonRetryable: true });
});

it('maps a version conflict to ORDER_VERSION_CONFLICT, retryable, and the retry succeeds', async () => {
  const other = open();
  let interfered = false;
  const pending: Promise<unknown>[] = [];
  const racing = createOrderActivities(
    open({
      beforeOrderWrite: () => {
        if (interfered) return;
        interfered = true;
        pending.push(other.applyRefund({ orderId: 'ord_1', operationId: 'op-other', refundId: 're_o', amount: 100 }));
      },
    }),
  );
  const input = { orderId: 'ord_1', operationId: 'op-3', refundId: 're_3', amount: 200 };
  await expect(failureOf(run(racing.applyRefund, input))).resolves.toMatchObject({ type: FailureType.OrderVersionConflict, nonRetryable: false });
  await Promise.all(pending);
  await expect(run(racing.applyRefund, input)).resolves.toMatchObject({ refundedAmount: 300, changed: true });
});
