// Our workflow modules are evaluated once per worker thread and shared by every run on it
// (src/workflows/preload.ts): what they export is frozen, their zod schemas are shared unfrozen, and
// two runs interleaved on one thread leave histories that each replay alone in a fresh worker.
import { Worker } from '@temporalio/worker';
import { ReusableVMWorkflowCreator } from '@temporalio/worker/lib/workflow/reusable-vm';
import { randomUUID } from 'node:crypto';
import vm from 'node:vm';
import { decisionUpdate } from '../../src/contract';
import { startRefund } from '../../src/client/refunds';
import { startHarness, stopped, type Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;

test('the bundle shares our modules: their exports frozen, their schemas parsing', async () => {
  const sourceMap = { version: 3, file: '', sources: [], names: [], mappings: '' };
  const creator = await ReusableVMWorkflowCreator.create(
    { code: h.workflowBundle.code, sourceMap, filename: 'shared-modules-test.js' },
    5000,
    new Set(),
  );
  try {
    // Before any run, the module cache holds only what every run shares.
    const shared = (id: string) =>
      vm.runInContext(
        `__webpack_module_cache__[${JSON.stringify(id)}]?.exports`,
        (creator as unknown as { context: vm.Context }).context,
      ) as Record<string, unknown> | undefined;
    const receipts = shared('./src/contract/receipts.ts');
    const workflows = shared('./src/workflows/index.ts');
    expect(receipts).toBeDefined();
    expect(workflows).toBeDefined();
    expect(Object.isFrozen(receipts)).toBe(true);
    expect(typeof workflows!.refundWorkflow).toBe('function');
    // A plain exported object is frozen to its leaves; a schema is shared unfrozen and parses.
    const { REFUND_SAGA } = shared('./src/compensations/registry.ts') as { REFUND_SAGA: Record<string, object> };
    expect(Object.isFrozen(REFUND_SAGA)).toBe(true);
    expect(Object.isFrozen(REFUND_SAGA.update_order)).toBe(true);
    const output = (REFUND_SAGA.update_order as { output: { safeParse(v: unknown): { success: boolean } } }).output;
    expect(Object.isFrozen(output)).toBe(false);
    expect(output.safeParse({}).success).toBe(false);
  } finally {
    await creator.destroy();
  }
});

test('two runs interleaved on one workflow thread share no state: each history replays alone in a fresh worker', async () => {
  // A parks at its gate (the provider cannot be read); B runs start to end on the same thread meanwhile.
  const a = await h.seedOrder(newOrderId());
  const b = await h.seedOrder(newOrderId(), { amount: 9900 });
  await h.failProviderReads(a.paymentIntentId);
  const { handle: first } = await startRefund(h.env.client, {
    orderId: a.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  expect((await stopped(first)).status).toBe('needs_attention');
  const { handle: second } = await startRefund(h.env.client, {
    orderId: b.id,
    amount: 700,
    currency: 'usd',
    requestedBy: 'other',
  });
  const resultB = await second.result();
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  await first.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'reads are back' }],
  });
  const resultA = await first.result();

  expect(resultA).toMatchObject({ status: 'completed', order: { refundedAmount: 1250 } });
  expect(resultB).toMatchObject({ status: 'completed', order: { refundedAmount: 700 } });
  expect((await h.ledger(a.paymentIntentId)).map((e) => e.amount)).toEqual([1250]);
  expect((await h.ledger(b.paymentIntentId)).map((e) => e.amount)).toEqual([700]);
  for (const handle of [first, second])
    await Worker.runReplayHistory(
      { workflowBundle: h.workflowBundle, dataConverter: h.workerConverter },
      await handle.fetchHistory(),
      handle.workflowId,
    );
});
