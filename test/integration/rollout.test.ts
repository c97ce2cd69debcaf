// Rolling out new builds with Worker Deployment Versioning, on the real stack and with the commands
// docs/production.md gives the operator. One refund, parked for a person twice, lives through
// both: versioning turned on (unversioned workers to build A), then build B ramped and promoted
// while A still polls; each time the run's next tasks go to the build just made current.
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
  fewLookups,
  policyFileText,
  startHarness,
  stopped,
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
  // Two attempts at a transient failure: the run parks in a second or so.
  fs.writeFileSync(path.join(dir, 'policy.json'), policyFileText(fewLookups(3)));
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

/** A worker process of one build (unversioned with `versioning` false), its build id derived from its bundle as in production. */
async function startBuild(bundle: string, versioning = true) {
  const worker = await startWorkerProcess({
    ...h.cliEnv(),
    ...UNSIGNED_ENV,
    DATA_DIR: dir,
    RECOVERY_POLICY_FILE: path.join(dir, 'policy.json'),
    WEBHOOKS: 'off',
    WORKFLOW_BUNDLE: bundle,
    STRIPE_TIMEOUT_MS: '2000',
    STRIPE_LIST_CONSISTENCY_MS: '300',
    WORKER_VERSIONING: versioning ? 'on' : 'off',
  });
  workers.push(worker);
  const buildId = versioning ? buildIdFor(version, fs.readFileSync(bundle, 'utf8')) : 'unversioned';
  expect(worker.output()).toContain(
    `"deployment":"${versioning ? `${deployment}:${buildId} (auto-upgrade)` : 'unversioned (WORKER_VERSIONING=off)'}"`,
  );
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
    if (done)
      return [
        { id: Number(e.eventId), build: done.deploymentVersion?.buildId || 'unversioned', identity: done.identity },
      ];
    const started = e.activityTaskStartedEventAttributes;
    return started ? [{ id: Number(e.eventId), build: 'activity', identity: started.identity }] : [];
  });
type Build = Awaited<ReturnType<typeof startBuild>>;
/** What a build ran: workflow tasks with its build id, and activities, all in its process. */
const ranBy = ({ buildId, worker }: Build) => [`${buildId} in ${worker.pid}`, `activity in ${worker.pid}`].sort();

test('a refund parked on unversioned workers moves to build A once versioning is on and A current, parks again, and completes on build B once B is current, A still polling', async () => {
  const started = Date.now();
  // The three builds start together: with no version current yet, only the unversioned workers are given work.
  const [u, a, b] = await Promise.all([startBuild(bundles.a, false), startBuild(bundles.a), startBuild(bundles.b)]);
  const order = await h.seedOrder(`ord_${randomUUID().slice(0, 8)}`);
  await h.failProviderReads(order.paymentIntentId);
  const request = { orderId: order.id, amount: 1250, currency: 'usd', requestedBy: 'test' };
  const { handle } = await startRefund(h.env.client, request);
  /** Waits for the run to park anew (not the park a decision just ended, which a first look may still see). */
  let parkedSince: string | undefined;
  const park = async () => {
    for (;;) {
      const { status, state } = await stopped(handle);
      expect(status).toBe('needs_attention');
      if (state.parked?.since !== parkedSince) return void (parkedSince = state.parked?.since);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const decide = (reason: string) =>
    handle.executeUpdate(decisionUpdate, { args: [{ decision: 'retry-step', by: 'ops', reason }] });
  const info = async () => (await handle.describe()).raw.workflowExecutionInfo!.versioningInfo;

  await park();
  // Each build's share starts where it became current: a workflow task the parked run still had on the build before
  // (it can finish after the park is seen) is that build's.
  // Where the run's history stands once the parked run is idle: after a park it still records the park (an activity,
  // then a workflow task), and a task of that still pending when the next build becomes current may go either way.
  const length = async () => {
    for (;;) {
      const { raw } = await handle.describe();
      if (!raw.pendingWorkflowTask && !raw.pendingActivities?.length)
        return (await handle.fetchHistory()).events!.length;
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const beforeA = await length();
  await untilAccepted('set-current-version', '--deployment-name', deployment, '--build-id', a.buildId);
  // Decided with the provider still unreadable: the run retries the gate on A, and parks again.
  await decide('try again');
  await park();
  // Measured before B is ramped: from then on a task may go to B.
  const beforeB = await length();
  expect((await info())?.deploymentVersion).toMatchObject({ deploymentName: deployment, buildId: a.buildId });

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
  await fetch(`${h.stripeUrl}/_faults`, { method: 'DELETE' });
  await decide('Stripe reads are back');
  completed(await handle.result());

  // Each distinct build and process that ran a workflow task or an activity, from one build made current to the next.
  const tasks = tasksOf((await handle.fetchHistory()).events!);
  const ran = (from: number, to: number) =>
    [
      ...new Set(
        tasks.filter((t) => t.id > from && t.id < to).map((t) => `${t.build} in ${t.identity?.split('@')[0]}`),
      ),
    ].sort();
  expect({ u: ran(0, beforeA), a: ran(beforeA, beforeB), b: ran(beforeB, Infinity) }).toEqual({
    u: ranBy(u),
    a: ranBy(a),
    b: ranBy(b),
  });
  expect((await info())?.deploymentVersion).toMatchObject({ deploymentName: deployment, buildId: b.buildId });
  expect(await h.ledger(order.paymentIntentId)).toHaveLength(1);
  console.log(`rollout: unversioned, A ${a.buildId}, B ${b.buildId}: ${Date.now() - started} ms`);
});
