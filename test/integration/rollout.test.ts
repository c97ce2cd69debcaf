// Rolling out new builds with Worker Deployment Versioning, on the real stack and with the commands
// docs/production.md gives the operator. Refunds parked on the 1.0 release (its own code, checked
// out of git, whose runs auto-upgrade), one while it ran unversioned and one on its versioned build,
// are pinned to it by the operator and finish there after a build of this code is current; a refund of this code stays on the build that started it through
// the next rollout (every run is pinned); new refunds go to the build made current.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { temporal } from '@temporalio/proto';
import { startWorkerProcess, type WorkerProcess } from '../../tools/src/chaos/worker-process';
import { findTool } from '../../tools/src/stack/tools';
import { PROJECT_ROOT } from '../../src/config';
import { startRefund } from '../../src/client/refunds';
import { decisionUpdate } from '../../src/contract';
import { buildIdFor, packageInfo } from '../../src/lifecycle/deployment';
import {
  completed,
  fewLookups,
  policyFileText,
  startHarness,
  stopped,
  UNSIGNED_ENV,
  type Harness,
} from '../helpers/harness';
import { scriptPath } from '../helpers/compiled';

const execFileAsync = promisify(execFile);
let h: Harness;
const workers: WorkerProcess[] = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-rollout-'));
const bundles = { a: path.join(dir, 'build-a.js'), b: path.join(dir, 'build-b.js') };
const { name: deployment, version } = packageInfo();
// The 1.0 release: the code issue 35 measured, whose refund runs a deployment of this code must let finish.
const RELEASE_1_0 = '2880f6700ae36c810ac3f424dc4b56ade019b02f';
const V1_BUILD = '1.0.0-2880f67';

let u1: Build;
let v1: Build;

beforeAll(async () => {
  // Two attempts at a transient failure: the run parks in a second or so.
  fs.writeFileSync(path.join(dir, 'policy.json'), policyFileText(fewLookups(3)));
  // 1.0 first, as in a deployment: it made the store, and this code's build expands it while 1.0 still runs.
  // This code's processes (its workers, the test's client) deflate no payload while 1.0, which cannot inflate, runs.
  h = await startHarness({
    inProcessWorker: false,
    payloadCompression: false,
    beforeStore: async (env) => void ([u1, v1] = await startRelease1_0(env)),
  });
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

const workerEnv = (env = h.cliEnv()) => ({
  ...env,
  ...UNSIGNED_ENV,
  DATA_DIR: dir,
  RECOVERY_POLICY_FILE: path.join(dir, 'policy.json'),
  WEBHOOKS: 'off',
  STRIPE_TIMEOUT_MS: '2000',
  STRIPE_LIST_CONSISTENCY_MS: '300',
  WORKER_VERSIONING: 'on',
});

/** A worker process of this code's build (compiled), its build id derived from its bundle as in production. */
async function startBuild(bundle: string) {
  const worker = await startWorkerProcess(
    { ...workerEnv(), WORKFLOW_BUNDLE: bundle },
    undefined,
    scriptPath('worker.ts'),
  );
  workers.push(worker);
  const buildId = buildIdFor(version, fs.readFileSync(bundle, 'utf8'));
  expect(worker.output()).toContain(`"deployment":"${deployment}:${buildId} (pinned)"`);
  return { worker, buildId };
}

/**
 * Two worker processes of the 1.0 release, from its own source out of git beside this checkout's node_modules (the
 * same lock): one unversioned, as 1.0 ran by default, and one of its versioned build. Each bundles its workflow code.
 */
async function startRelease1_0(env: NodeJS.ProcessEnv): Promise<[Build, Build]> {
  const source = path.join(dir, 'v1');
  fs.mkdirSync(source);
  await execFileAsync('bash', ['-c', 'git -C "$ROOT" archive "$COMMIT" | tar -x -C "$SOURCE"'], {
    env: { ...process.env, ROOT: PROJECT_ROOT, COMMIT: RELEASE_1_0, SOURCE: source },
  }).catch((err: Error) => {
    throw new Error(`the 1.0 release (${RELEASE_1_0}) is not in this clone's history: ${err.message}`);
  });
  fs.symlinkSync(path.join(PROJECT_ROOT, 'node_modules'), path.join(source, 'node_modules'));
  const script = path.join(source, 'src', 'worker.ts');
  const unversioned = await startWorkerProcess({ ...workerEnv(env), WORKER_VERSIONING: 'off' }, 180_000, script);
  workers.push(unversioned);
  const versioned = await startWorkerProcess({ ...workerEnv(env), WORKER_BUILD_ID: V1_BUILD }, 180_000, script);
  workers.push(versioned);
  expect(unversioned.output()).toContain('"deployment":"unversioned (WORKER_VERSIONING=off)"');
  expect(versioned.output()).toContain(`"deployment":"${deployment}:${V1_BUILD} (auto-upgrade)"`);
  return [
    { worker: unversioned, buildId: 'unversioned' },
    { worker: versioned, buildId: V1_BUILD },
  ];
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
const Behavior = temporal.api.enums.v1.VersioningBehavior;
/** Who ran each workflow task (build id and process) and each activity (process), in history order. */
const tasksOf = (events: Event[]) =>
  events.flatMap((e) => {
    const done = e.workflowTaskCompletedEventAttributes;
    if (done)
      return [
        { id: Number(e.eventId), build: done.deploymentVersion?.buildId || 'unversioned', identity: done.identity },
      ];
    const started = e.activityTaskStartedEventAttributes;
    return started ? [{ id: Number(e.eventId), build: 'activity', identity: started.identity }] : [];
  });
type Build = { worker: WorkerProcess; buildId: string };
/** What a build ran: workflow tasks with its build id, and activities, all in its process. */
const ranBy = ({ buildId, worker }: Build) => [`${buildId} in ${worker.pid}`, `activity in ${worker.pid}`].sort();

test('refunds parked on the 1.0 release, unversioned and versioned, finish there once pinned, a refund of this code stays on its build through the next rollout, new refunds go to the current build', async () => {
  const started = Date.now();
  const [a, b] = await Promise.all([startBuild(bundles.a), startBuild(bundles.b)]);
  const refund = async () => {
    const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
    await h.failProviderReads(order.paymentIntentId);
    const request = { orderId: order.id, amount: 1250, currency: 'usd', requestedBy: 'test' };
    const { handle } = await startRefund(h.env.client, request);
    const { status } = await stopped(handle);
    expect(status).toBe('needs_attention');
    return { handle, order };
  };
  type Run = Awaited<ReturnType<typeof refund>>;
  const info = async ({ handle }: Run) => (await handle.describe()).raw.workflowExecutionInfo!.versioningInfo;

  // 1.0 as it ran by default, unversioned: a refund parks.
  const unversioned = await refund();
  // Versioning turned on with the 1.0 build: a refund parks on it, auto-upgrading as 1.0's runs do.
  await untilAccepted('set-current-version', '--deployment-name', deployment, '--build-id', v1.buildId);
  const onV1 = await refund();
  expect(await info(onV1)).toMatchObject({ behavior: Behavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE });

  // The operator pins every open refund to 1.0 before this code's build becomes current. The query names no version:
  // a run parked while 1.0 ran unversioned has had no task on a versioned worker, and carries none to filter on.
  const { stderr } = await execFileAsync(findTool('temporal'), [
    'workflow',
    'update-options',
    '--query',
    `WorkflowType = 'refundWorkflow' AND ExecutionStatus = 'Running'`,
    '--versioning-override-behavior',
    'pinned',
    '--versioning-override-deployment-name',
    deployment,
    '--versioning-override-build-id',
    v1.buildId,
    '--reason',
    'rollout of 2.0',
    '--yes',
    '--address',
    h.env.address,
    '--namespace',
    h.namespace,
  ]);
  for (let i = 0; ; i++) {
    const overrides = await Promise.all([unversioned, onV1].map(async (r) => (await info(r))?.versioningOverride));
    if (overrides.every(Boolean)) break;
    if (i > 100) throw new Error(`the batch did not pin both 1.0 runs within 20 s: ${stderr}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await untilAccepted('set-current-version', '--deployment-name', deployment, '--build-id', a.buildId);
  const onA = await refund();
  expect(await info(onA)).toMatchObject({ behavior: Behavior.VERSIONING_BEHAVIOR_PINNED });

  // B is ramped first (a cautious rollout's first step), then promoted.
  await untilAccepted(
    'set-ramping-version',
    '--deployment-name',
    deployment,
    '--build-id',
    b.buildId,
    '--percentage',
    '10',
  );
  const described = JSON.parse((await deploymentCli('describe', '--name', deployment, '--output', 'json')).stdout) as {
    routingConfig: { currentVersionBuildID: string; rampingVersionBuildID: string; rampingVersionPercentage: number };
  };
  expect(described.routingConfig).toMatchObject({
    currentVersionBuildID: a.buildId,
    rampingVersionBuildID: b.buildId,
    rampingVersionPercentage: 10,
  });
  await untilAccepted('set-current-version', '--deployment-name', deployment, '--build-id', b.buildId);
  const onB = await refund();

  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  for (const run of [unversioned, onV1, onA, onB]) {
    await run.handle.executeUpdate(decisionUpdate, {
      args: [{ decision: 'retry-step', by: 'ops', reason: 'Stripe reads are back' }],
    });
    completed(await run.handle.result());
    expect(await h.ledger(run.order.paymentIntentId)).toHaveLength(1);
  }
  // Every workflow task and activity of each run, from its start to its end, ran on the build that started it.
  const ran = async ({ handle }: Run) =>
    [
      ...new Set(
        tasksOf((await handle.fetchHistory()).events!).map((t) => `${t.build} in ${t.identity?.split('@')[0]}`),
      ),
    ].sort();
  expect({ unversioned: await ran(unversioned), v1: await ran(onV1), a: await ran(onA), b: await ran(onB) }).toEqual({
    unversioned: [...ranBy(u1), ...ranBy(v1)].sort(),
    v1: ranBy(v1),
    a: ranBy(a),
    b: ranBy(b),
  });
  console.log(`rollout: 1.0 ${v1.buildId}, A ${a.buildId}, B ${b.buildId}: ${Date.now() - started} ms`);
});
