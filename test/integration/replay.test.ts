// Replays every recorded history under test/histories against today's workflow code: a change that
// would break runs already in flight fails here, unless it is guarded by patched(). The recordings
// cover a completed run, a reconciled lost response, a run that ended with its outcome unknown, a
// compensated run, a run that settled an earlier version's unknown outcome before it refunded, and a run
// that parked for a person and resumed on their decision, a pending refund awaited until its webhook, a
// run whose activities ran in the bulkhead pools, one that reached its completion gate with one provider call
// left and was let through (before patched('whole-attempts-in-budget')), and three on the local-steps epoch
// (versions.ts): its store steps as local activities, once plainly, once queried all along, once with
// each local activity outliving its workflow task. The first five predate parking: they replay through the
// patched('outcomes-and-parking') branch that runs already in flight keep, and the older ones predate the
// bulkheads (patched('bulkheads-v1')). Five runs carry the payments review's patch (REVIEW_FIXES): a notice
// confirmed delivered, a run parked with its effect read from the operation's record, malformed messages
// ignored, a held correction sent on approval, and a retry-step on create_refund that looked first.
// Recordings are written decoded (through the codec server). Refresh a recording only for an intended,
// patched() change, and keep the old ones:
//   RECORD_HISTORY=1 npx jest test/integration/decisions.test.ts (or provider-lifecycle.test.ts, bulkheads.test.ts)
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const dir = path.join(__dirname, '..', 'histories');
const recorded = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((file) => ({ file, history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))) }));

test('the recordings cover the completed, reconciled, unknown, compensated, earlier-version, parked, awaited, bulkhead, budget-edge, local-step and review-fix paths, and a run startRefund started running', () => {
  expect(recorded.map((r) => r.file)).toEqual([
    'refund-awaited-webhook.json',
    'refund-bulkheads.json',
    'refund-compensated.json',
    'refund-completed.json',
    'refund-earlier-settled.json',
    'refund-gate-one-call-left.json',
    'refund-local-steps-heartbeat.json',
    'refund-local-steps-queried.json',
    'refund-local-steps.json',
    'refund-parked-then-retried.json',
    'refund-reconciled.json',
    'refund-review-confirmed-delivered.json',
    'refund-review-effect-from-record.json',
    'refund-review-malformed-messages.json',
    'refund-review-notice-held.json',
    'refund-review-retry-create-looked-up.json',
    'refund-started-running.json',
    'refund-unknown.json',
  ]);
});

test('every recorded history replays against the current workflow code', async () => {
  expect(await replayAll(require.resolve('../../src/workflows'))).toEqual([]);
});

test('the bundle `npm run bundle` writes for production workers replays every recorded history', async () => {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bundle-')), 'workflow-bundle.js');
  const root = path.join(__dirname, '..', '..');
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', path.join(root, 'src', 'build', 'bundle-workflows.ts'), '--out', out], { timeout: 120_000 });
  expect(stdout).toMatch(/start workers with WORKFLOW_BUNDLE=/);
  expect(await replayAll({ workflowBundle: { codePath: out } })).toEqual([]);
  // Runs share one zod, evaluated once (preload.ts), and none builds the policy file's schemas.
  const code = fs.readFileSync(out, 'utf8');
  expect(code).toMatch(/preloadModules\(\) \{\s*__webpack_require__\([^)]*"\.\/src\/workflows\/preload\.ts"\)/);
  const at = code.indexOf('/***/ "./src/workflows/preload.ts"');
  const preload = code.slice(at, code.indexOf('/***/ }', at));
  expect(at).toBeGreaterThan(-1);
  expect(preload).toContain('__webpack_require__(/*! zod */ "./node_modules/zod/v4/classic/external.js")');
  expect(code).not.toContain('./src/reliability/policy-schema.ts');
  // Activity-side modules (the breaker, the policy file's loader) are not workflow code: changing them cannot break a replay.
  for (const activitySide of ['circuit-breaker', 'policy-file', 'attempt', 'completion-gate']) expect(code).not.toMatch(new RegExp(`/\\*\\*\\*/ "\\./src/[a-z/-]+/${activitySide}\\.ts"`));
  expect(code).toMatch(/\/\*\*\*\/ "\.\/src\/workflows\/refund\.ts"/);
  fs.rmSync(path.dirname(out), { recursive: true, force: true });
});

async function replayAll(workflows: string | Pick<ReplayWorkerOptions, 'workflowBundle'>): Promise<string[]> {
  const options = typeof workflows === 'string' ? { workflowsPath: workflows } : workflows;
  const results = Worker.runReplayHistories(options, recorded.map(({ file, history }) => ({ workflowId: file, history })));
  const failed: string[] = [];
  for await (const result of results) if (result.error) failed.push(result.workflowId);
  return failed;
}

test('the replay fails for a workflow that changed incompatibly', async () => {
  await expect(
    Worker.runReplayHistory({ workflowsPath: require.resolve('../fixtures/reordered-workflow') }, recorded.find((r) => r.file === 'refund-completed.json')!.history),
  ).rejects.toThrow(DeterminismViolationError);
});

test('a new step added without patched() breaks every recorded run; the same step behind patched() breaks none', async () => {
  expect(await replayAll(require.resolve('../fixtures/unpatched-change'))).toEqual(recorded.map((r) => r.file));
  expect(await replayAll(require.resolve('../fixtures/patched-change'))).toEqual([]);
});
