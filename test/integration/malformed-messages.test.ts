// Messages from outside a run (Signals, Updates) are input like any other: anyone who may signal
// the namespace can send one; a plaintext one is refused (PAYLOAD_PLAINTEXT=reject). A malformed one is ignored
// (Signal) or refused (Update) and never fails a workflow task, which would freeze the run for
// good: it could no longer reconcile, park, take a decision or compensate.
import { WorkflowFailedError, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { decodeOptionalFailureToOptionalError } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { ApplicationFailure, type Payload } from '@temporalio/common';
import { workerDataConverter } from '../../src/codec/data-converter';
import { ENCRYPTED_ENCODING, KEY_ID_METADATA } from '../../src/codec/encryption-codec';
import { parseKeyring } from '../../src/codec/keyring';
import { PLAINTEXT_REFUSED } from '../../src/codec/plaintext';
import { loadConfig } from '../../src/config';
import { startRefund } from '../../src/client/refunds';
import { followUpWorkflow } from '../../src/workflows';
import {
  decisionUpdate,
  followUpQuery,
  providerEventSignal,
  REFUND_WORKFLOW,
  stepsQuery,
  TASK_QUEUE,
} from '../../src/contract';
import { findTool } from '../../tools/src/stack/tools';
import { startHarness, stopped, type Harness } from '../helpers/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const { EventType, UpdateWorkflowExecutionLifecycleStage } = temporal.api.enums.v1;
const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const clearFaults = () => fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });

/** What the malformed Signals are: not an object, an empty one, fields of the wrong types, an event about another refund. */
const MALFORMED_EVENTS: [string, unknown][] = [
  ['null', null],
  ['a number', 42],
  ['an empty object', {}],
  [
    'wrong field types',
    { id: 7, type: null, refundId: ['re_1'], refundStatus: 1, created: 'yesterday', receivedAt: {} },
  ],
  [
    'an unknown refund id',
    {
      id: 'evt_forged',
      type: 'refund.failed',
      refundId: 're_not_this_runs',
      refundStatus: 'failed',
      created: 1_700_000_000,
      receivedAt: '2026-01-01T00:00:00.000Z',
    },
  ],
];

/** Why each workflow task in the run's history failed (none is the answer a run can live with), decoded. */
async function taskFailures(handle: WorkflowHandle): Promise<string[]> {
  const events = (await handle.fetchHistory()).events ?? [];
  const failures = events
    .filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
    .map((e) => e.workflowTaskFailedEventAttributes?.failure);
  return Promise.all(
    failures.map(
      async (f) =>
        (await decodeOptionalFailureToOptionalError(h.env.client.options.loadedDataConverter, f))?.message ?? '?',
    ),
  );
}

/** Waits until the worker has taken the run's last Signal: a workflow task after it completed, or one failed. */
async function signalsTaken(handle: WorkflowHandle): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const events = (await handle.fetchHistory()).events ?? [];
    const types = events.map((e) => e.eventType);
    const after = types.slice(types.lastIndexOf(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) + 1);
    if (
      after.includes(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) ||
      after.includes(EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${handle.workflowId} took no workflow task after its Signals`);
}

/** A run parked at the completion gate: listing the payment intent's refunds fails there. */
async function parkedAtGate() {
  const order = await h.seedOrder(newOrderId());
  await h.failProviderReads(order.paymentIntentId);
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  expect((await stopped(handle)).status).toBe('needs_attention');
  return { order, handle };
}

test('malformed Signals and Updates sent to a parked run are ignored or refused, and it still takes a valid decision and completes', async () => {
  const { order, handle } = await parkedAtGate();

  for (const [, event] of MALFORMED_EVENTS) await handle.signal(providerEventSignal, event as never);
  await signalsTaken(handle);
  expect(await taskFailures(handle)).toEqual([]);

  const refused = (input: unknown) =>
    handle.executeUpdate(decisionUpdate, { args: [input as never] }).then(
      () => 'accepted',
      (e: unknown) => e,
    );
  for (const input of [
    null,
    7,
    'retry-step',
    {},
    { decision: 'retry-step', by: 5, reason: [] },
    { decision: 'nuke', by: 'ops', reason: 'x' },
    { decision: 'abandon', by: 'ops', reason: 'x', extra: true },
  ]) {
    const outcome = await refused(input);
    expect(outcome).toBeInstanceOf(WorkflowUpdateFailedError);
    expect((outcome as WorkflowUpdateFailedError).cause?.message).toMatch(/^invalid decision: /);
  }

  const parked = await handle.query(stepsQuery);
  expect(parked.status).toBe('needs_attention');
  expect(parked.providerEvents).toEqual([]);
  expect(parked.decisions).toEqual([]);
  // What was ignored is in the run's state, for an operator: what came, and why it was not taken.
  expect(parked.ignoredMessages.total).toBe(MALFORMED_EVENTS.length);
  expect(parked.ignoredMessages.latest).toEqual(
    MALFORMED_EVENTS.map(() =>
      expect.objectContaining({
        message: 'providerEvent',
        at: expect.any(String),
        reason: expect.any(String),
        input: expect.any(String),
      }),
    ),
  );
  expect(parked.ignoredMessages.latest.map((m) => m.reason)).toEqual([
    expect.stringMatching(/^malformed: /),
    expect.stringMatching(/^malformed: /),
    expect.stringMatching(/^malformed: .*id/),
    expect.stringMatching(/^malformed: .*refundId/),
    expect.stringMatching(/names refund re_not_this_runs, not this run's refund re_/),
  ]);

  await clearFaults();
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
  });
  await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
  expect(await taskFailures(handle)).toEqual([]);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
});

test('the follow-up run ignores malformed Signals too, from its first workflow task on, and finishes', async () => {
  const operationId = `refund:test:${newOrderId()}:v1`;
  const valid = {
    id: `evt_${randomUUID().slice(0, 8)}`,
    type: 'refund.failed',
    refundId: 're_followed',
    refundStatus: 'failed',
    created: 1_700_000_000,
    receivedAt: '2026-01-01T00:00:00.000Z',
  };
  // Its look at the provider is held back a moment, so that the Signals reach a running follow-up.
  const slowExamine = async (input: Parameters<Harness['activities']['examineFollowUp']>[0]) => {
    await new Promise((r) => setTimeout(r, 2000));
    return h.activities.examineFollowUp(input);
  };
  await h.withWorker({ examineFollowUp: slowExamine }, async (taskQueue) => {
    // Started by a malformed Signal: the handler runs in the run's very first workflow task.
    const handle = await h.env.client.workflow.signalWithStart(followUpWorkflow, {
      workflowId: `follow-up:${operationId}`,
      taskQueue,
      args: [{ operationId, refundId: 're_followed', originalWorkflowId: `refund-${operationId}` }],
      signal: providerEventSignal,
      signalArgs: [null as never],
    });
    for (const [, event] of MALFORMED_EVENTS.slice(1)) await handle.signal(providerEventSignal, event as never);
    await handle.signal(providerEventSignal, valid);
    await signalsTaken(handle);
    expect(await taskFailures(handle)).toEqual([]);
    const result = await handle.result();
    expect(result.operationId).toBe(operationId);
    expect(await taskFailures(handle)).toEqual([]);
    const state = await handle.query(followUpQuery);
    expect(state.providerEvents).toEqual([valid]);
    expect(state.ignoredMessages.total).toBe(MALFORMED_EVENTS.length);
    expect(state.ignoredMessages.latest.at(-1)?.reason).toMatch(
      /names refund re_not_this_runs, not this run's refund re_followed/,
    );
  });
});

/** Payloads no worker can decode, as anyone may send them past the client's codec. */
const utf8 = (text: string) => new TextEncoder().encode(text);
const isSealed = (p: Payload) => new TextDecoder().decode(p.metadata?.encoding ?? undefined) === ENCRYPTED_ENCODING;
const UNDECODABLE: [string, Payload][] = [
  [
    'encrypted with a key no worker has',
    { metadata: { encoding: utf8(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: utf8('k-forged') }, data: utf8('x') },
  ],
  ['json/plain that is not JSON', { metadata: { encoding: utf8('json/plain') }, data: utf8('{not json') }],
  ['an encoding nobody knows', { metadata: { encoding: utf8('binary/forged') }, data: utf8('x') }],
];

test('Signals and Updates whose payload cannot be decoded are ignored or refused, and the run still takes a valid decision and completes', async () => {
  const { order, handle } = await parkedAtGate();
  const { workflowService } = h.env.client;
  const execution = { workflowId: handle.workflowId };
  // Sealed with the workers' own key, then altered: it fails authentication.
  const [sealed] = await h.env.client.options.loadedDataConverter.payloadCodecs[0].encode([
    { metadata: { encoding: utf8('json/plain') }, data: utf8('{}') },
  ]);
  const altered = Uint8Array.from(sealed.data!);
  altered[20] ^= 1;
  UNDECODABLE.push(['encrypted with a key the workers have, then altered', { ...sealed, data: altered }]);

  for (const [, payload] of UNDECODABLE) {
    await workflowService.signalWorkflowExecution({
      namespace: h.namespace,
      workflowExecution: execution,
      signalName: providerEventSignal.name,
      input: { payloads: [payload] },
      identity: 'test',
      requestId: randomUUID(),
    });
  }
  await signalsTaken(handle);
  expect(await taskFailures(handle)).toEqual([]);

  for (const [, payload] of UNDECODABLE) {
    const { outcome } = await workflowService.updateWorkflowExecution({
      namespace: h.namespace,
      workflowExecution: execution,
      waitPolicy: {
        lifecycleStage: UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
      },
      request: {
        meta: { updateId: randomUUID(), identity: 'test' },
        input: { name: decisionUpdate.name, args: { payloads: [payload] } },
      },
    });
    const refusal = await decodeOptionalFailureToOptionalError(
      h.env.client.options.loadedDataConverter,
      outcome?.failure,
    );
    expect(refusal?.message).toMatch(isSealed(payload) ? /^invalid decision: / : /^plaintext payload refused/);
  }
  expect(await taskFailures(handle)).toEqual([]);

  const parked = await handle.query(stepsQuery);
  expect(parked.decisions).toEqual([]);
  // The workers refuse plaintext (PAYLOAD_PLAINTEXT=reject): what is not sealed is refused before any decoding.
  expect(parked.ignoredMessages.latest.map((m) => m.reason)).toEqual(
    UNDECODABLE.map(([, p]) =>
      expect.stringMatching(isSealed(p) ? /^undecodable: / : /^refused: plaintext payload refused/),
    ),
  );
  expect(parked.ignoredMessages.latest.map((m) => m.input)).toEqual(
    UNDECODABLE.map(() => expect.stringMatching(/^\{"\$undecodable":/)),
  );

  await clearFaults();
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
  });
  await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
  expect(await taskFailures(handle)).toEqual([]);
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

/** The `temporal` CLI as a user without the codec endpoint runs it: it sends its input in plaintext. */
async function plainCli(...args: string[]): Promise<{ ok: boolean; out: string }> {
  return promisify(execFile)(findTool('temporal'), [...args, '--address', h.env.address, '--namespace', h.namespace], {
    encoding: 'utf8',
  }).then(
    ({ stdout, stderr }) => ({ ok: true, out: stdout + stderr }),
    (e: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
}

const plainStart = (workflowId: string, orderId: string, taskQueue = TASK_QUEUE) =>
  plainCli(
    'workflow',
    'start',
    '--type',
    REFUND_WORKFLOW,
    '--task-queue',
    taskQueue,
    '--workflow-id',
    workflowId,
    '--input',
    JSON.stringify({ orderId, amount: 1250, currency: 'usd', requestedBy: 'cli' }),
  );

test('plaintext from the temporal CLI is refused: a start fails naming the codec endpoint and does nothing; a Signal, an Update and a Query to a parked run are refused and leave it as it was', async () => {
  const refusal = new RegExp(`plaintext payload refused.*--codec-endpoint ${h.codecUrl.replace(/\./g, '\\.')}`);
  const plain = await h.seedOrder(newOrderId());
  const started = await plainStart(`plain-${plain.id}`, plain.id);
  expect(started.ok).toBe(true);
  const plainRun = h.env.client.workflow.getHandle(`plain-${plain.id}`);
  const failed = await plainRun.result().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(failed).toBeInstanceOf(WorkflowFailedError);
  const cause = (failed as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  expect((cause as ApplicationFailure).type).toBe(PLAINTEXT_REFUSED);
  expect(cause?.message).toMatch(refusal);
  // Readable without the codec, by whoever sent the plaintext.
  expect((await plainCli('workflow', 'describe', '--workflow-id', plainRun.workflowId)).out).toMatch(refusal);
  const plainEvents = ((await plainRun.fetchHistory()).events ?? []).map((e) => e.eventType);
  expect(plainEvents).not.toContain(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED);
  expect(plainEvents).not.toContain(EventType.EVENT_TYPE_MARKER_RECORDED);
  expect(await taskFailures(plainRun)).toEqual([]);
  expect(await h.ledger(plain.paymentIntentId)).toEqual([]);
  expect(await h.messages({ to: plain.customerEmail })).toEqual([]);

  const { order, handle } = await parkedAtGate();
  const before = await handle.query(stepsQuery);
  const target = ['--workflow-id', handle.workflowId];

  // The provider's word that the refund failed, as the run would act on it (it would compensate), but in plaintext.
  const event = {
    id: `evt_${randomUUID().slice(0, 8)}`,
    type: 'refund.failed',
    refundId: before.effect.refundId,
    refundStatus: 'failed',
    created: 1_700_000_000,
    receivedAt: new Date().toISOString(),
  };
  expect(
    (
      await plainCli(
        'workflow',
        'signal',
        ...target,
        '--name',
        providerEventSignal.name,
        '--input',
        JSON.stringify(event),
      )
    ).ok,
  ).toBe(true);
  await signalsTaken(handle);
  const decision = JSON.stringify({ decision: 'abandon', by: 'ops', reason: 'sent in plaintext' });
  const update = await plainCli(
    'workflow',
    'update',
    'execute',
    ...target,
    '--name',
    decisionUpdate.name,
    '--input',
    decision,
  );
  expect(update).toMatchObject({ ok: false, out: expect.stringMatching(refusal) });
  const query = await plainCli('workflow', 'query', ...target, '--type', stepsQuery.name, '--input', '{}');
  expect(query).toMatchObject({ ok: false, out: expect.stringMatching(refusal) });

  const after = await handle.query(stepsQuery);
  expect(after).toMatchObject({ status: 'needs_attention', providerEvents: [], decisions: [] });
  expect(after.steps).toEqual(before.steps);
  expect(after.ignoredMessages.latest.at(-1)).toMatchObject({
    message: providerEventSignal.name,
    reason: expect.stringMatching(/^refused: plaintext payload refused/),
  });
  const types = ((await handle.fetchHistory()).events ?? []).map((e) => e.eventType);
  expect(types).not.toContain(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED);
  expect(types).not.toContain(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED);
  expect(await taskFailures(handle)).toEqual([]);

  await clearFaults();
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
  });
  await expect(handle.result()).resolves.toMatchObject({ status: 'completed' });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
});

test('with PAYLOAD_PLAINTEXT=allow (a migration) a worker takes a plaintext start and carries the refund out', async () => {
  const config = loadConfig({ PAYLOAD_KEYS: h.payloadKeys, PAYLOAD_PLAINTEXT: 'allow' });
  const allowing = workerDataConverter(config, parseKeyring(h.payloadKeys, 'test'));
  const order = await h.seedOrder(newOrderId());
  await h.withWorker(
    {},
    async (taskQueue) => {
      expect((await plainStart(`plain-${order.id}`, order.id, taskQueue)).ok).toBe(true);
      const result = await h.env.client.workflow.getHandle(`plain-${order.id}`).result();
      expect(result).toMatchObject({ status: 'completed', orderId: order.id });
    },
    undefined,
    undefined,
    allowing,
  );
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
});
