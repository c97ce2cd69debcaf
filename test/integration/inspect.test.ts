// `inspect` on the real stack: for a run in each state it reads the step table, the history and the
// evidence where the effects landed, and gives the right verdict; the evidence can overrule the run.
// Also the CLIs: inspect's text, --attention page by page, and decide.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { generateKey } from '../../src/cli/decider-keys';
import { keyIdOf, messageIdForKey, stepsQuery } from '../../src/contract';
import { findTool } from '../../tools/src/stack/tools';
import { startRefund } from '../../src/client/refunds';
import { inspectRun, type Inspection } from '../../src/inspect/inspection';
import { outcomeOf } from '../../src/client/outcome';
import { verdict } from '../../src/reliability/verdict';
import { refundWorkflow } from '../../src/workflows';
import { completed, fewLookups, refund, startHarness, stopped, TEST_POLICY, type Harness } from '../helpers/harness';
import { nodeArgs } from '../helpers/compiled';

const execFileAsync = promisify(execFile);
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});
afterEach(async () => {
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  await fetch(`${h.mail.apiUrl}/_faults`, { method: 'DELETE' });
});

const newOrderId = () => `ord_${randomUUID().slice(0, 8)}`;
const request = (orderId: string) => ({ orderId, amount: 1250, currency: 'usd', requestedBy: 'test' });
const opId = (orderId: string) => `refund:test:${orderId}:v1`;
const inspect = (workflowId: string, sources = h.sources) => inspectRun(h.env.client, sources, 'test', workflowId);
const cli = (script: string, args: string[], env: NodeJS.ProcessEnv = {}) =>
  execFileAsync(process.execPath, nodeArgs(`cli/${script}`, ...args), {
    env: { ...h.cliEnv(), ...env },
    encoding: 'utf8',
  });
const claim = (i: Inspection, pattern: RegExp) => i.inferences.find((x) => pattern.test(x.claim));

test('completed: every effect confirmed where it landed; auto-retry is safe', async () => {
  const order = await h.seedOrder(newOrderId());
  const result = completed(await refund(h.env.client, request(order.id)));
  const i = await inspect(result.workflowId);

  expect(i).toMatchObject({
    execution: 'COMPLETED',
    refundStatus: 'completed',
    operationId: opId(order.id),
    verdict: 'auto-retry is safe',
    nextAction: expect.stringMatching(/^none: every effect is confirmed/),
  });
  expect(i.steps?.map((s) => s.status)).toEqual(['completed', 'completed', 'completed', 'completed', 'completed']);
  const refundId = result.refund.refundId;
  expect(i.facts.map((f) => f.id)).toEqual(
    expect.arrayContaining([
      `temporal:${result.workflowId}`,
      `stripe:${refundId}`,
      `store:operation:${opId(order.id)}`,
      `mailbox:${result.notification.messageId}`,
      `ledger:${opId(order.id)}:create_refund`,
    ]),
  );
  expect(i.inferences.map((x) => x.status)).toEqual(['confirmed', 'confirmed', 'confirmed']);
  expect(claim(i, /exists at the provider, once/)).toMatchObject({
    basis: expect.arrayContaining([`stripe:${refundId}`]),
  });
  expect(i.unavailable).toEqual([]);
});

test('the evidence overrules the run: a second refund under the operation id hands it to a person', async () => {
  const order = await h.seedOrder(newOrderId());
  const result = completed(await refund(h.env.client, request(order.id)));
  // Someone refunds by hand and tags it with the operation: the provider now holds two.
  await h.stripe.refunds.create({
    payment_intent: order.paymentIntentId,
    amount: 100,
    metadata: { operation_id: opId(order.id) },
  });
  const i = await inspect(result.workflowId);
  expect(claim(i, /exactly one refund exists/)).toMatchObject({ status: 'contradicted' });
  expect(i).toMatchObject({
    verdict: 'stop and hand to a person',
    nextAction: expect.stringMatching(
      /^investigate before anything else: the evidence contradicts "exactly one refund exists/,
    ),
  });
});

test('compensated: the refund failed, the order was restored and the correction sent; compensate, then resume', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const { handle } = await startRefund(h.env.client, request(order.id));
  expect((await stopped(handle)).status).toBe('compensated');
  const i = await inspect(handle.workflowId);

  expect(i).toMatchObject({
    execution: 'COMPLETED',
    refundStatus: 'compensated',
    verdict: 'compensate, then resume',
    nextAction: expect.stringMatching(/operation-version 2/),
  });
  expect(claim(i, /^nothing was refunded$/)).toMatchObject({ status: 'confirmed' });
  expect(claim(i, /the order was restored/)).toMatchObject({ status: 'confirmed' });
  expect(claim(i, /^the correction .* reached the mailbox, once/)).toMatchObject({ status: 'confirmed' });
  expect(i.steps?.find((s) => s.name === 'update_order')?.compensation).toMatchObject({ status: 'completed' });
});

test('parked with the outcome unknown: stop and hand to a person; without the provider, the refund is to be confirmed', async () => {
  const order = await h.seedOrder(newOrderId());
  await h.stripeFault({ kind: 'drop_after_commit', match: { idempotencyKey: `${opId(order.id)}:create_refund` } });
  await h.failProviderReads(order.paymentIntentId);
  const workflowId = `refund-${order.id}-v1`;
  await h.withWorker(
    {},
    async (taskQueue) => {
      await stopped(h.env.client.workflow.start(refundWorkflow, { taskQueue, workflowId, args: [request(order.id)] }));
      // The provider still cannot be read, and this inspect has no local ledger (as with real Stripe).
      const blind = await inspect(workflowId, { ...h.sources, ledgerUrl: undefined });
      expect(blind).toMatchObject({
        execution: 'RUNNING',
        refundStatus: 'needs_attention',
        verdict: 'stop and hand to a person',
        nextAction: expect.stringMatching(/^reconcile operation/),
      });
      expect(claim(blind, /^the refund is unknown$/)).toMatchObject({
        status: 'to be confirmed',
        check: expect.stringMatching(/metadata.operation_id/),
      });
      expect(blind.unavailable).toEqual(
        expect.arrayContaining([expect.stringMatching(/^stripe: listing the refunds of pi_/)]),
      );
      expect(claim(blind, /customer notice was not sent/)).toMatchObject({ status: 'confirmed' });

      // Once the provider answers, the refund it made is observed, which the run has not yet recorded.
      await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
      const seen = await inspect(workflowId);
      expect(claim(seen, /a refund exists for this operation \(re_/)).toMatchObject({ status: 'confirmed' });
      expect(seen.verdict).toBe('stop and hand to a person');
      await h.env.client.workflow.getHandle(workflowId).terminate('test done');
    },
    { policy: fewLookups(2) },
  );
});

test('parked after a version conflict: auto-retry is safe; decide retry-step from the CLI finishes it', async () => {
  const order = await h.seedOrder(newOrderId());
  // Every attempt the policy allows meets a competing writer (5 for a conflict that changed nothing).
  await h.storeFault('conflict', order.id, 5);
  const { handle } = await startRefund(h.env.client, request(order.id));
  const { status, state } = await stopped(handle);
  expect(status).toBe('needs_attention');

  const i = await inspect(handle.workflowId);
  expect(i).toMatchObject({
    refundStatus: 'needs_attention',
    verdict: 'auto-retry is safe',
    nextAction: expect.stringMatching(/^retry-step update_order/),
    decision: 'retry-step:update_order',
    decidedBy: expect.arrayContaining(['ops']),
    approvedBy: [],
  });
  // One verdict function: inspect's is the run's own, and both are the function's over the facts the run shows.
  const { facts, deciders, ...own } = state.parked!;
  const drawn = verdict({ facts, deciders });
  expect(own).toMatchObject(drawn);
  expect(i).toMatchObject(drawn);
  expect(i.steps?.find((s) => s.name === 'update_order')).toMatchObject({
    status: 'failed',
    error: { code: 'STATE_CONFLICT', certainty: 'not_executed' },
  });
  expect(claim(i, /exists at the provider, once/)).toMatchObject({ status: 'confirmed' });
  expect(claim(i, /the order does not show a refund/)).toMatchObject({ status: 'confirmed' });

  // The text, and a decision the run refuses (it records nothing), side by side: two CLI starts in the time of one.
  const [text, refused] = await Promise.all([
    cli('inspect.ts', [handle.workflowId]).then((r) => r.stdout),
    cli('decide.ts', [
      handle.workflowId,
      'retry-step',
      '--answers',
      i.address!,
      '--by',
      'mallory',
      '--reason',
      'why not',
    ]).catch((e: { code: number; stderr: string }) => e),
  ]);
  expect(text).toMatch(/^Steps$/m);
  expect(text).toMatch(/update_order\s+failed\s+5\s+0\s+STATE_CONFLICT \(not_executed\)/);
  expect(text).toMatch(/^Observed facts$/m);
  expect(text).toMatch(/^Verdict {6}auto-retry is safe$/m);
  expect(text).toMatch(/^Escalation {3}the refund stands; the run parks as needs_attention/m);
  // The parking read here: decide answers it, and refuses it once the run has moved on.
  expect(i.address).toMatch(new RegExp(`^run-${i.runId}:parked-.+:after-0$`));
  expect(text).toMatch(new RegExp(`^Address {6}${i.address}$`, 'm'));
  expect(text).toContain(
    `Decide       npm run decide -- ${handle.workflowId} retry-step --answers ${i.address} --by <name> --reason "<why>"`,
  );
  expect(text).toContain(
    `temporal workflow update execute --workflow-id ${handle.workflowId} --name decide --input "$(npm run -s decide -- ${handle.workflowId} retry-step --answers ${i.address} --by <name> --reason '<why>' --print)" --codec-endpoint http://127.0.0.1:8888`,
  );

  expect(refused).toMatchObject({
    code: 2,
    stderr: expect.stringMatching(/refused, nothing was recorded: mallory may not retry-step/),
  });
  const decided = await cli('decide.ts', [
    handle.workflowId,
    'retry-step',
    '--answers',
    i.address!,
    '--by',
    'ops',
    '--reason',
    'the competing writer is gone',
    '--json',
  ]);
  expect(JSON.parse(decided.stdout)).toMatchObject({
    record: { seq: 1, decision: 'retry-step', step: 'update_order', outcome: 'applied' },
    updateId: expect.stringMatching(/^retry-step:parked-/),
  });

  expect(await handle.result()).toMatchObject({ status: 'completed' });
  const after = await inspect(handle.workflowId);
  expect(after).toMatchObject({
    verdict: 'auto-retry is safe',
    decisions: [expect.objectContaining({ by: 'ops', reason: 'the competing writer is gone' })],
  });
  expect(after.facts).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        says: expect.stringMatching(/^update decide retry-step:parked-.* accepted: retry-step by ops/),
      }),
    ]),
  );
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  expect(await h.messages({ to: order.customerEmail })).toHaveLength(1);
});

test('signed decisions: keygen makes a key file (0600) and the DECIDERS entry, decide signs a proposal with it, and --print signs an approval that the temporal CLI sends', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deciders-'));
  // The CLI makes ops's key (its output is the DECIDERS entry); lead's is made in process, to spare a CLI start.
  const made = await cli('decide.ts', ['keygen', '--name', 'ops', '--out', path.join(dir, 'ops.key')]);
  const ops = /^DECIDERS +ops=operator:([0-9a-f]{64})$/m.exec(made.stdout)![1]!;
  const lead = generateKey(path.join(dir, 'lead.key')).publicKey;
  expect(fs.statSync(path.join(dir, 'ops.key')).mode & 0o777).toBe(0o600);
  const policy = {
    ...TEST_POLICY,
    decisions: {
      roles: { ops: ['operator' as const], lead: ['operator' as const, 'approver' as const] },
      keys: { ops, lead },
      needApproval: ['retry-step:update_order'],
      approvalTtlMs: 600_000,
    },
  };
  const order = await h.seedOrder(newOrderId());
  await h.storeFault('conflict', order.id, 5);
  await h.withWorker(
    {},
    async (taskQueue) => {
      const { handle } = await startRefund(h.env.client, request(order.id), taskQueue);
      expect((await stopped(handle)).status).toBe('needs_attention');
      const decide = (...args: string[]) => cli('decide.ts', args, { TASK_QUEUE: taskQueue, HOME: dir });
      const proposed = await decide(
        handle.workflowId,
        'retry-step',
        '--answers',
        (await inspect(handle.workflowId)).address!,
        '--by',
        'ops',
        '--reason',
        'the competing writer is gone',
        '--key',
        path.join(dir, 'ops.key'),
      );
      expect(proposed.stdout).toMatch(/decision #1 retry-step update_order by ops, signed with ed25519:[0-9a-f]{16}/);

      // The approver answers the proposal: its parking, as inspect shows it now.
      const proposal = (await inspect(handle.workflowId)).address!;
      const printed = await decide(
        ...[handle.workflowId, 'approve', '--answers', proposal, '--by', 'lead', '--reason', 'checked'],
        ...['--print', '--expires-in', '10m'],
        ...['--key', path.join(dir, 'lead.key')],
      );
      const input = JSON.parse(printed.stdout);
      expect(input).toMatchObject({
        decision: 'approve',
        by: 'lead',
        signed: { workflowId: handle.workflowId, answers: proposal },
      });
      expect(printed.stderr).toContain(`temporal workflow update execute --workflow-id ${handle.workflowId}`);
      expect((await handle.query(stepsQuery)).decisions).toHaveLength(1);
      await execFileAsync(
        findTool('temporal'),
        [
          ...['workflow', 'update', 'execute', '--workflow-id', handle.workflowId, '--name', 'decide'],
          ...['--input', printed.stdout.trim(), '--address', h.env.address, '--namespace', h.namespace],
          ...['--codec-endpoint', h.codecUrl],
        ],
        { encoding: 'utf8' },
      );
      expect(await handle.result()).toMatchObject({ status: 'completed' });
      const trail = await h.store.operations.auditTrail(opId(order.id));
      expect(trail.find((e) => e.event === 'decision')?.detail).toMatchObject({
        by: 'ops',
        keyId: keyIdOf(ops),
        approvedBy: 'lead',
        approvedByKeyId: keyIdOf(lead),
      });
      expect((await inspect(handle.workflowId)).facts.map((f) => f.says)).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^decision retry-step by ops \\(signed ${keyIdOf(ops)}\\), approved by lead \\(signed ${keyIdOf(lead)}\\)`,
          ),
        ),
      );
    },
    { policy },
  );
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a quarantined compensation: stop and hand to a person, with the mailbox saying whether the customer has it', async () => {
  const order = await h.seedOrder(newOrderId(), { paymentMethod: 'pm_card_refundFail' });
  const correction = messageIdForKey(`${opId(order.id)}:notify_customer:compensate`);
  await h.mailFault({ kind: 'drop_after_accept', match: { messageId: correction } });
  const { handle } = await startRefund(h.env.client, request(order.id));
  expect((await stopped(handle)).status).toBe('needs_attention');

  const i = await inspect(handle.workflowId);
  expect(i).toMatchObject({
    verdict: 'stop and hand to a person',
    nextAction: expect.stringMatching(/compensation's outcome is unknown/),
    approvedBy: ['lead'],
  });
  expect(i.steps?.find((s) => s.name === 'notify_customer')?.compensation).toMatchObject({ status: 'unknown' });
  // The run cannot tell; the mailbox can.
  expect(claim(i, /^the correction .* reached the mailbox, once/)).toMatchObject({
    status: 'confirmed',
    basis: expect.arrayContaining([`mailbox:${correction}`]),
  });

  // A proposal waits for its approver, and inspect says so.
  await cli('decide.ts', [
    ...[handle.workflowId, 'compensate', '--answers', i.address!],
    ...['--by', 'ops', '--reason', 'resend the correction'],
  ]);
  const waiting = await inspect(handle.workflowId);
  expect(waiting).toMatchObject({
    refundStatus: 'awaiting_approval',
    nextAction: expect.stringMatching(/^approve or reject compensate proposed by ops/),
    decidedBy: ['lead'],
  });
  await cli('decide.ts', [handle.workflowId, 'abandon', '--current', '--by', 'lead', '--reason', 'x']).catch(
    (e: { code: number; stderr: string }) => expect(e.stderr).toMatch(/waiting for approval/),
  );
  await cli('decide.ts', [
    ...[handle.workflowId, 'reject', '--answers', waiting.address!],
    ...['--by', 'lead', '--reason', 'the mailbox has it'],
  ]);
  await cli('decide.ts', [
    ...[handle.workflowId, 'abandon', '--current'],
    ...['--by', 'lead', '--reason', 'the customer has the correction'],
  ]);
  expect(await handle.result()).toMatchObject({ status: 'abandoned' });
  expect(await h.messages({ messageId: correction })).toHaveLength(1);
});

test('inspect --attention lists every run that needs a person, page by page', async () => {
  const parked = await Promise.all(
    [1, 2, 3].map(async () => {
      const order = await h.seedOrder(newOrderId());
      await h.failProviderReads(order.paymentIntentId);
      const { handle } = await startRefund(h.env.client, request(order.id));
      await stopped(handle);
      return handle.workflowId;
    }),
  );
  let listed: { workflowId: string; execution: string; verdict: string }[] = [];
  for (let i = 0; i < 50 && !parked.every((id) => listed.some((r) => r.workflowId === id)); i++) {
    const { stdout } = await cli('inspect.ts', ['--attention', '--page-size', '2', '--json']);
    listed = stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const id of parked)
    expect(listed).toContainEqual(
      expect.objectContaining({ workflowId: id, execution: 'RUNNING', verdict: 'auto-retry is safe' }),
    );
  const table = (await cli('inspect.ts', ['--attention'])).stdout;
  expect(table).toMatch(/^workflow id\s+execution\s+status\s+step\s+effect\s+verdict$/m);
  expect(table).toMatch(/\d+ run\(s\) need a person/);
  await Promise.all(
    parked.map((id) => cli('decide.ts', [id, 'abandon', '--current', '--by', 'ops', '--reason', 'test done'])),
  );
});

test("a run on a queue of its own: inspect asks whether a worker polls the run's queue, not the default one", async () => {
  const polling = jest.spyOn(h.env.client.workflowService, 'describeTaskQueue');
  try {
    await h.withWorker({}, async (queue) => {
      const order = await h.seedOrder(newOrderId());
      const { handle } = await startRefund(h.env.client, request(order.id), queue);
      expect(await outcomeOf(handle)).toMatchObject({ kind: 'result', result: { status: 'completed' } });
      const i = await inspect(handle.workflowId);
      expect(i.steps?.map((s) => s.status)).toEqual(Array(5).fill('completed'));
      expect(polling.mock.calls.map(([asked]) => asked.taskQueue?.name)).toEqual([queue]);
    });
  } finally {
    polling.mockRestore();
  }
});

test('bad input changes nothing: no such run, no decision, both a workflow id and --attention', async () => {
  // Four CLI calls that change nothing, side by side.
  await Promise.all([
    expect(cli('inspect.ts', ['refund-nope-v1'])).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/inspect: no workflow refund-nope-v1/),
    }),
    expect(cli('inspect.ts', [])).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/give a workflow id, or --attention/),
    }),
    expect(
      cli('decide.ts', ['refund-nope-v1', 'retry-step', '--current', '--by', 'ops', '--reason', 'x']),
    ).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/no workflow refund-nope-v1/) }),
    expect(cli('decide.ts', ['refund-nope-v1', 'shrug', '--by', 'ops', '--reason', 'x'])).rejects.toMatchObject({
      stderr: expect.stringMatching(
        /value 'shrug' is invalid for argument 'decision'. Allowed choices are retry-step, compensate, abandon, approve, reject/,
      ),
    }),
  ]);
});
