// Encrypted payloads on a real server: what Temporal stores holds no customer email, amount or
// decision note in plaintext, and a run begun under one key finishes after a rotation.
import { Client } from '@temporalio/client';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { refundDataConverter } from '../../src/codec/data-converter';
import { KEY_ID_METADATA } from '../../src/codec/encryption-codec';
import { newKeyEntry, parseKeyring } from '../../src/codec/keyring';
import { startRefund } from '../../src/client/refunds';
import { findTool } from '../../tools/src/stack/tools';
import { decisionUpdate } from '../../src/contract';
import { startHarness, stopped, type Harness } from '../helpers/harness';

const run = promisify(execFile);
let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const show = async (workflowId: string, ...extra: string[]) =>
  (
    await run(
      findTool('temporal'),
      [
        'workflow',
        'show',
        '--workflow-id',
        workflowId,
        '--address',
        h.env.address,
        '--namespace',
        h.namespace,
        '--output',
        'json',
        ...extra,
      ],
      { maxBuffer: 64 << 20 },
    )
  ).stdout;

/** Every string in the CLI's JSON, and the text of every one that is base64: where a payload's bytes would show. */
function texts(json: string): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') {
      out.push(v);
      if (/^[A-Za-z0-9+/]+={0,2}$/.test(v) && v.length % 4 === 0) out.push(Buffer.from(v, 'base64').toString('latin1'));
    } else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(JSON.parse(json));
  return out;
}

/** The key ids of the payloads in a raw history event. */
function keyIds(value: unknown): string[] {
  if (!value || typeof value !== 'object') return [];
  const id = (value as { metadata?: Record<string, Uint8Array> }).metadata?.[KEY_ID_METADATA];
  return id ? [Buffer.from(id).toString()] : Object.values(value).flatMap(keyIds);
}

/** Parks a run at its completion gate (the provider's refund list fails), for a decision. */
async function parkedRefund(client: Client, taskQueue: string | undefined) {
  const email = `enc-${randomUUID().slice(0, 6)}@customer.test`;
  const order = await h.seedOrder(newOrderId(), { customerEmail: email, amount: 98_765 });
  await h.failProviderReads(order.paymentIntentId);
  const { handle } = await startRefund(
    client,
    { orderId: order.id, amount: 87_654, currency: 'usd', requestedBy: 'ops' },
    taskQueue,
  );
  expect((await stopped(handle)).status).toBe('needs_attention');
  return { order, email, handle };
}

test('the raw history holds no plaintext customer email, amount or decision note; through the codec server it does', async () => {
  const note = `customer called ${randomUUID().slice(0, 8)}`;
  const { email, handle } = await parkedRefund(h.env.client, undefined);
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  await handle.executeUpdate(decisionUpdate, { args: [{ decision: 'retry-step', by: 'ops', reason: note }] });
  expect((await handle.result()).status).toBe('completed');

  const raw = texts(await show(handle.workflowId)).join('\n');
  // (The run itself records the address masked, e***@customer.test: not even the domain may show.)
  for (const secret of [email, '@customer.test', note, '87654', '98765']) expect(raw).not.toContain(secret);
  // The same history through the codec server (as the Web UI and `temporal --codec-endpoint` read it) has them.
  const decoded = texts(await show(handle.workflowId, '--codec-endpoint', h.codecUrl)).join('\n');
  for (const secret of ['@customer.test', note, '87654', '98765']) expect(decoded).toContain(secret);
});

test('a run begun under the old key finishes after a rotation: its old payloads still decode, new ones use the new key', async () => {
  const oldKeys = newKeyEntry(new Date('2026-01-01'));
  const rotated = `${newKeyEntry()},${oldKeys}`;
  const [oldId, newId] = [oldKeys.split(':')[0], rotated.split(':')[0]];
  const converter = (keys: string) => refundDataConverter(parseKeyring(keys, 'test'));
  const clientWith = (keys: string) =>
    new Client({
      connection: h.env.client.connection,
      namespace: h.env.namespace ?? 'default',
      dataConverter: converter(keys),
    });
  const taskQueue = `rotation-${randomUUID()}`;

  const { order, handle } = await h.withWorker(
    {},
    () => parkedRefund(clientWith(oldKeys), taskQueue),
    undefined,
    taskQueue,
    converter(oldKeys),
  );
  // The workers and clients restart with the new key first and the old one kept.
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  const after = clientWith(rotated).workflow.getHandle(handle.workflowId);
  const result = await h.withWorker(
    {},
    async () => {
      await after.executeUpdate(decisionUpdate, {
        args: [{ decision: 'retry-step', by: 'ops', reason: 'after the rotation' }],
      });
      return after.result();
    },
    undefined,
    taskQueue,
    converter(rotated),
  );
  expect(result).toMatchObject({ status: 'completed', refund: { amount: 87_654 } });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);

  const events = (await after.fetchHistory()).events ?? [];
  // The started event's payloads (the input, and the Web UI's summary and details) are all under the old key.
  expect(keyIds(events[0])).toEqual([oldId, oldId, oldId]);
  expect(keyIds(events.at(-1))).toEqual([newId]);
  // A process that only has the old key cannot read what was written after the rotation, and says which key it lacks.
  await expect(clientWith(oldKeys).workflow.getHandle(handle.workflowId).result()).rejects.toThrow(
    `encrypted with key ${newId}`,
  );
});
