// `decide` answers the parking its decider read, not whatever the run waits for when it sends (issue 34,
// item 3). On the real stack: a run parks at notify_customer, a person inspects it, the Stripe server
// fails the refund and its webhook wakes the run, which compensates what it can and parks again. A
// decision for the inspected parking is refused with the verdict the run has now, and nothing reaches
// its history; so is a script's decision that names no parking.
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startRefund } from '../../src/client/refunds';
import { decisionAddress, decisionUpdate, messageIdForKey, stepsQuery } from '../../src/contract';
import { startWebhookReceiver } from '../../src/webhooks/receiver';
import { refundWorkflow } from '../../src/workflows';
import { startHarness, stopped, type Harness } from '../helpers/harness';
import { nodeArgs } from '../helpers/compiled';

const execFileAsync = promisify(execFile);
const EventType = temporal.api.enums.v1.EventType;
/** Refunds fail at the provider only when a test says so (h.settleRefund). */
const ON_DEMAND_MS = 3_600_000;

let h: Harness;
let receiver: { url: string; close(): Promise<void> };
// No decider key in HOME: the CLI's decisions go unsigned, as the test policy takes them.
const home = fs.mkdtempSync(path.join(os.tmpdir(), 'decide-address-'));
beforeAll(async () => {
  h = await startHarness({ lifecycle: { settleDelayMs: ON_DEMAND_MS, failDelayMs: ON_DEMAND_MS } });
  const deps = { stripe: h.stripe, store: h.store, temporal: h.env.client, secret: 'whsec_unset' };
  receiver = await startWebhookReceiver(deps, { port: 0 });
  const endpoint = await h.stripe.webhookEndpoints.create({ url: receiver.url, enabled_events: ['*'] });
  deps.secret = endpoint.secret!;
});
afterAll(async () => {
  await receiver?.close();
  await h?.close();
  fs.rmSync(home, { recursive: true, force: true });
});
afterEach(async () => {
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  await fetch(`${h.mail.apiUrl}/_faults`, { method: 'DELETE' });
});

type Handle = WorkflowHandle<typeof refundWorkflow>;
const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
/** The CLI as a script runs it: no terminal (execFile's stdin is a pipe). */
const cli = (script: string, args: string[]) =>
  execFileAsync(process.execPath, nodeArgs(`cli/${script}`, ...args), {
    env: { ...h.cliEnv(), HOME: home, DECIDER_KEY_FILE: '' },
    encoding: 'utf8',
  });
const failed = (p: Promise<unknown>) =>
  p.then(
    (ok) => ({ code: 0, ...(ok as object) }) as { code: number; stdout: string; stderr: string },
    (e: { code: number; stdout: string; stderr: string }) => e,
  );
const until = async (what: string, check: () => Promise<boolean>, ms = 30_000) => {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100)))
    if (await check()) return;
  throw new Error(`timed out waiting for ${what}`);
};

/** The event types of the run's history once it is idle: its last workflow task completed, nothing pending. */
async function idleHistory(handle: Handle): Promise<string[]> {
  for (let i = 0; i < 150; i++) {
    const { raw } = await handle.describe();
    const events = (await handle.fetchHistory()).events ?? [];
    if (
      !raw.pendingActivities?.length &&
      !raw.pendingWorkflowTask &&
      events.at(-1)?.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )
      return events.map((e) => EventType[e.eventType!]!);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${handle.workflowId} did not go idle`);
}
const updates = (types: string[]) => types.filter((t) => /UPDATE/.test(t));

/** A run parked at notify_customer (its notice's hand-over unknown), its refund standing at the provider. */
async function parkedAtNotice() {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const notice = messageIdForKey(`refund:test:${order.id}:v1:notify_customer`);
  // The mail server stores the notice and the connection drops before its 250: nobody knows whether it went.
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: notice } });
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 700,
    currency: 'usd',
    requestedBy: 'test',
  });
  const parked = await stopped(handle);
  expect(parked).toMatchObject({
    status: 'needs_attention',
    state: { parked: { failedStep: 'notify_customer' }, effect: { status: 'refunded' } },
  });
  return { order, handle, refundId: parked.state.effect.refundId! };
}

/** The Stripe server fails the refund; its webhook wakes the run, which reverts the order and parks again. */
async function repark(handle: Handle, refundId: string, before: string) {
  await h.settleRefund(refundId);
  await until('the run parked again', async () => {
    const state = await handle.query(stepsQuery);
    return state.parked !== null && state.effect.status === 'failed' && decisionAddress(state) !== before;
  });
  return handle.query(stepsQuery);
}

test('a script that names no parking is refused and told to pass --answers or --current; nothing reaches the history', async () => {
  const { handle, refundId } = await parkedAtNotice();
  const read = decisionAddress(await handle.query(stepsQuery));
  // The person reads the run, then decides; meanwhile the provider fails the refund and the run parks again.
  await repark(handle, refundId, read);
  const history = await idleHistory(handle);

  const sent = await failed(cli('decide.ts', [handle.workflowId, 'abandon', '--by', 'ops', '--reason', 'as read']));
  expect(sent).toMatchObject({
    code: 2,
    stdout: '',
    stderr: expect.stringMatching(/which parking .*--answers <address>.*--current/s),
  });
  expect(await idleHistory(handle)).toEqual(history);
  expect(updates(history)).toEqual([]);
  expect((await handle.query(stepsQuery)).decisions).toEqual([]);
  await handle.terminate('test done');
});

test('inspect prints the parking; decide with it after the run parked again is refused with the verdict now, and nothing reaches the history', async () => {
  const { handle, refundId } = await parkedAtNotice();
  const inspected = JSON.parse((await cli('inspect.ts', [handle.workflowId, '--json'])).stdout);
  expect(inspected.address).toBe(decisionAddress(await handle.query(stepsQuery)));
  const text = (await cli('inspect.ts', [handle.workflowId])).stdout;
  expect(text).toMatch(new RegExp(`^Address {6}${inspected.address}$`, 'm'));
  expect(text).toContain(`npm run decide -- ${handle.workflowId} retry-step --answers ${inspected.address} --by`);

  const now = await repark(handle, refundId, inspected.address);
  const history = await idleHistory(handle);
  const refused = await failed(
    cli('decide.ts', [
      ...[handle.workflowId, 'abandon', '--answers', inspected.address],
      ...['--by', 'ops', '--reason', 'the customer has the notice'],
    ]),
  );
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/refused, nothing was recorded: .* has moved since you read it/);
  expect(refused.stderr).toContain(`you answer ${inspected.address}`);
  expect(refused.stderr).toContain(`it now waits at ${decisionAddress(now)}`);
  expect(refused.stderr).toMatch(new RegExp(`verdict +${now.parked!.verdict}`));
  expect(refused.stderr).toContain(now.parked!.nextAction);
  expect(await idleHistory(handle)).toEqual(history);
  expect(updates(history)).toEqual([]);

  // Said explicitly, a decision answers whatever the run waits for now, and says which.
  const current = await cli('decide.ts', [
    ...[handle.workflowId, 'abandon', '--current'],
    ...['--by', 'ops', '--reason', 'support takes it from here'],
  ]);
  expect(current.stderr).toContain(`answers ${decisionAddress(now)} (--current)`);
  expect(current.stdout).toMatch(/decision #1 abandon by ops/);
  await expect(handle.result()).resolves.toMatchObject({ status: 'abandoned' });
});

test('the validator refuses an unsigned decision addressed to a parking the run has left, before it reaches history', async () => {
  const { handle, refundId } = await parkedAtNotice();
  const read = decisionAddress(await handle.query(stepsQuery));
  // A CLI that read the parking, then sent after the run moved: the workflow itself refuses it.
  const now = await repark(handle, refundId, read);
  const history = await idleHistory(handle);
  const abandon = { decision: 'abandon' as const, by: 'ops', reason: 'as read', answers: read };
  await expect(handle.executeUpdate(decisionUpdate, { args: [abandon] })).rejects.toMatchObject({
    cause: { message: expect.stringMatching(`answers ${read}, but the run is now at ${decisionAddress(now)}`) },
  });
  expect(await idleHistory(handle)).toEqual(history);
  await expect(
    handle.executeUpdate(decisionUpdate, { args: [{ ...abandon, answers: decisionAddress(now) }] }),
  ).resolves.toMatchObject({ seq: 1, decision: 'abandon', outcome: 'applied' });
  await expect(handle.result()).resolves.toMatchObject({ status: 'abandoned' });
});
