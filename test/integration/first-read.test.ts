// A send's activity making a read step's first look (withFirstRead) against a real SQLite store: what goes back to be
// charged when the look is not returned, and the look's row begun in the send's own recording transaction.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { recordingEffect, stepCall, succeeded, type Attempt } from '../../src/activities/attempt';
import { withFirstRead, type FirstLook } from '../../src/activities/first-read';
import { openStore, type OrderStore } from '../../src/store';
import { activityEnv } from '../helpers/activity-env';

let store: OrderStore;
beforeAll(async () => {
  store = await openStore(`sqlite:${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'first-read-')), 'orders.db')}`);
});
afterAll(() => store?.close());

const run = { workflowId: 'wf-read', runId: 'run-read' };
const call = (op: string) => stepCall('completion_gate', { key: `${op}:gate`, operationId: op }, 'stripe');
/** A look that fails as the attempt runner fails one: its failure's details carry the ledger it could read back. */
const failing = (ledger: unknown[]): FirstLook<{ op: string }> => ({
  call: ({ op }) => call(op),
  look: async () => {
    throw ApplicationFailure.create({ type: 'TRANSIENT_DEPENDENCY', details: [{ ledger }] });
  },
});
const asked = (op: string) => ({ read: { step: 'completion_gate', input: { op }, startToCloseMs: 5000 } });
const send = async () => ({ sent: true });
const env = (attempt: number) => activityEnv({ attempt, workflowExecution: run });

test("a retried send makes no look and hands back what an earlier attempt's look left in the ledger", async () => {
  const op = 'op-retried';
  const earlier = store.operations.openAttempt({ ...call(op), ...run, attempt: 1 });
  await earlier.finish({ ...succeeded({ requests: 2, providerRequestId: null }) });
  let looked = false;
  const look: FirstLook<{ op: string }> = {
    call: ({ op: o }) => call(o),
    look: async () => ((looked = true), {}),
  };
  const result = await env(2).run(withFirstRead(send, { completion_gate: look }, store.operations), asked(op));
  expect(looked).toBe(false);
  expect(result).toMatchObject({ sent: true, read: { completion_gate: { failed: [{ transportRequests: 2 }] } } });
  // Nothing in the ledger: nothing goes back.
  const none = await env(2).run(withFirstRead(send, { completion_gate: look }, store.operations), asked('op-none'));
  expect(none).toEqual({ sent: true });
});

test('a look that fails hands back its ledger, read from the store when its failure could not carry it', async () => {
  const op = 'op-failed';
  const result = await env(1).run(withFirstRead(send, { completion_gate: failing([]) }, store.operations), asked(op));
  // The look's runner never wrote here (the fake throws at once): no row, nothing to charge.
  expect(result).toEqual({ sent: true });
  const row = { attempt: 1, startedAt: 'x', finishedAt: 'y', outcome: 'TRANSIENT_DEPENDENCY', transportRequests: 1 };
  const carried = await env(1).run(
    withFirstRead(send, { completion_gate: failing([row]) }, store.operations),
    asked(op),
  );
  expect(carried).toMatchObject({ read: { completion_gate: { failed: [row] } } });
});

test("the look's row begins in the send's recording transaction; a send that fails before it leaves none", async () => {
  const op = 'ride-read:v1';
  await store.seedOrder({
    id: 'ride-read',
    paymentIntentId: 'pi_r',
    customerEmail: 'r@example.test',
    currency: 'usd',
    amount: 500,
  });
  const request = { orderId: 'ride-read', amount: 100, currency: 'usd', reason: 'requested_by_customer' };
  const intent = {
    operationId: op,
    orderId: 'ride-read',
    operationVersion: 1,
    scope: 'test',
    requestHash: 'h',
    request,
    actor: 'wf',
  };
  const recorded = async () => {
    // The send's own attempt: its effect recorded with its row's end, as the notice's sent mark is.
    const own = store.operations.openAttempt({
      key: `${op}:notify`,
      step: 'notify_customer',
      operationId: op,
      ...run,
      attempt: 1,
    });
    const attempt = { requests: 1, providerRequestId: null, ledger: own } as unknown as Attempt;
    await recordingEffect(attempt, () => store.operations.commitIntent(intent));
    return { sent: true };
  };
  let rowsAtLook: number | undefined;
  const look: FirstLook<{ op: string }> = {
    call: ({ op: o }) => call(o),
    look: async (_, within) => {
      rowsAtLook = (await store.operations.attempts(`${op}:gate`, run.runId)).length;
      await within.ledger!.finish(succeeded({ requests: 1, providerRequestId: null }));
      return { verdict: 'pass' };
    },
  };
  const result = await env(1).run(withFirstRead(recorded, { completion_gate: look }, store.operations), asked(op));
  expect(result).toMatchObject({ sent: true, read: { completion_gate: { output: { verdict: 'pass' } } } });
  expect(rowsAtLook).toBe(1);

  const refused = async () => {
    throw new Error('the mail server refused it');
  };
  await expect(
    env(1).run(withFirstRead(refused, { completion_gate: look }, store.operations), asked('op-refused')),
  ).rejects.toThrow(/refused/);
  expect(await store.operations.attempts('op-refused:gate', run.runId)).toEqual([]);
});
