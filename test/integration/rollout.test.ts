// Rolling out a new build with Worker Deployment Versioning, on the real stack and with the
// commands docs/production.md gives the operator: build A (a worker process) parks a refund, build B
// is ramped then made current while A still polls, and the parked run, decided, completes on B.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { temporal } from '@temporalio/proto';
import { startWorkerProcess, type WorkerProcess } from '../../tools/src/chaos/worker-process';
import { findTool } from '../../tools/src/stack/tools';
import { startRefund } from '../../src/client/refunds';
import { decisionUpdate } from '../../src/contract';
import { buildIdFor, packageInfo } from '../../src/lifecycle/deployment';
import {
  completed,
  policyFileText,
  startHarness,
  stopped,
  TEST_POLICY,
  UNSIGNED_ENV,
  type Harness,
} from '../helpers/harness';

const execFileAsync = promisify(execFile);
let h: Harness;
const workers: WorkerProcess[] = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-rollout-'));
const bundles = { a: path.join(dir, 'build-a.js'), b: path.join(dir, 'build-b.js') };
const { name: deployment, version } = packageInfo();

beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  fs.writeFileSync(path.join(dir, 'policy.json'), policyFileText(TEST_POLICY));
  fs.writeFileSync(bundles.a, h.workflowBundle.code);
  // The same workflow code with a comment (before the source map, which the SDK reads at the end): another
  // hash, so another build id, as a new release would have.
  const code = h.workflowBundle.code;
  const map = code.lastIndexOf('\n//# sourceMappingURL=');
  fs.writeFileSync(bundles.b, `${code.slice(0, map)}\n// build B${code.slice(map)}`);
});
afterAll(async () => {
  for (const w of workers) await w.kill();
  await h?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A worker process of one build, versioned, with its build id derived from its bundle as in production. */
async function startBuild(bundle: string) {
  const worker = await startWorkerProcess({
    ...h.cliEnv(),
    ...UNSIGNED_ENV,
    DATA_DIR: dir,
    RECOVERY_POLICY_FILE: path.join(dir, 'policy.json'),
    WEBHOOKS: 'off',
    WORKFLOW_BUNDLE: bundle,
    STRIPE_TIMEOUT_MS: '2000',
    STRIPE_LIST_CONSISTENCY_MS: '300',
    WORKER_VERSIONING: 'on',
  });
  workers.push(worker);
  const buildId = buildIdFor(version, fs.readFileSync(bundle, 'utf8'));
  expect(worker.output()).toContain(`"deployment":"${deployment}:${buildId} (auto-upgrade)"`);
  return { worker, buildId };
}

/** `temporal worker deployment …` on the file's namespace, as an operator runs it. */
const deploymentCli = (...args: string[]) =>
  execFileAsync(findTool('temporal'), [
    'worker',
    'deployment',
    ...args,
    '--address',
    h.env.address,
    '--namespace',
    h.namespace,
  ]);
/** Retried while the server has not yet registered the version its workers poll with (a second or so after they start). */
async function untilAccepted(...args: string[]) {
  for (let i = 0; ; i++) {
    try {
      return await deploymentCli(...args, '--yes');
    } catch (err) {
      if (i >= 50) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

type Event = temporal.api.history.v1.IHistoryEvent;
/** Who ran each workflow task (build id and process) and each activity (process), in history order. */
const tasksOf = (events: Event[]) =>
  events.flatMap((e) => {
    const done = e.workflowTaskCompletedEventAttributes;
    if (done) return [{ id: Number(e.eventId), build: done.deploymentVersion?.buildId, identity: done.identity }];
    const started = e.activityTaskStartedEventAttributes;
    return started ? [{ id: Number(e.eventId), build: 'activity', identity: started.identity }] : [];
  });

test('a run parked on build A, decided after build B is made current, completes on B while A still polls', async () => {
  const started = Date.now();
  const a = await startBuild(bundles.a);
  await untilAccepted('set-current-version', '--deployment-name', deployment, '--build-id', a.buildId);

  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
  await h.failProviderReads(order.paymentIntentId);
  const { handle } = await startRefund(h.env.client, {
    orderId: order.id,
    amount: 1250,
    currency: 'usd',
    requestedBy: 'test',
  });
  // Build B comes up while the run parks: polling, but not current, it is given nothing.
  const bUp = startBuild(bundles.b);
  expect((await stopped(handle)).status).toBe('needs_attention');
  const parkedAt = (await handle.fetchHistory()).events!.length;
  const info = async () => (await handle.describe()).raw.workflowExecutionInfo!.versioningInfo!;
  expect((await info()).deploymentVersion).toMatchObject({ deploymentName: deployment, buildId: a.buildId });

  // B is ramped first (a cautious rollout's first step), then promoted.
  const b = await bUp;
  await untilAccepted(
    'set-ramping-version',
    '--deployment-name',
    deployment,
    '--build-id',
    b.buildId,
    '--percentage',
    '10',
  );
  const ramping = JSON.parse((await deploymentCli('describe', '--name', deployment, '--output', 'json')).stdout) as {
    routingConfig: { currentVersionBuildID: string; rampingVersionBuildID: string; rampingVersionPercentage: number };
  };
  expect(ramping.routingConfig).toMatchObject({
    currentVersionBuildID: a.buildId,
    rampingVersionBuildID: b.buildId,
    rampingVersionPercentage: 10,
  });
  await untilAccepted('set-current-version', '--deployment-name', deployment, '--build-id', b.buildId);

  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
  });
  completed(await handle.result());

  const tasks = tasksOf((await handle.fetchHistory()).events!);
  const before = tasks.filter((t) => t.id < parkedAt);
  const after = tasks.filter((t) => t.id > parkedAt);
  // Up to the park everything ran on A; from the decision on, every workflow task and activity ran on B.
  const ranOn = (list: typeof tasks) => [...new Set(list.map((t) => `${t.build} in ${t.identity?.split('@')[0]}`))];
  expect(ranOn(before).sort()).toEqual([`${a.buildId} in ${a.worker.pid}`, `activity in ${a.worker.pid}`].sort());
  expect(ranOn(after).sort()).toEqual([`${b.buildId} in ${b.worker.pid}`, `activity in ${b.worker.pid}`].sort());
  expect(await info()).toMatchObject({ deploymentVersion: { deploymentName: deployment, buildId: b.buildId } });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  console.log(`rollout: A ${a.buildId} -> B ${b.buildId}, ${after.length} tasks on B, ${Date.now() - started} ms`);
});
