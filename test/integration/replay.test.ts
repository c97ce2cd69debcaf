// Replays every recorded history under test/histories against today's workflow code: a change that
// would break runs already in flight fails here, unless it is guarded by patched(). The recordings are
// the 1.0 baseline (no deployment has runs of older code), one per way a refund run ends or waits:
// completed, rejected, compensated, parked then decided, reconciled after a lost answer, still unknown
// (parked), awaited a webhook, approval expired; and a follow-up that compensated a refund the provider
// failed after its run completed; and a batch occurrence that started refunds, recorded with the code before the
// Web UI's summaries (c00160b: its child starts carry none, and replay against today's code, which sets them);
// and a completed run whose policy is pinned as its changes from the shipped one (the 1.0 recordings pin it whole);
// and runs cancelled in a park's bookkeeping: two recorded with 1.0 (the run closed without its cancellation path,
// kept so on replay by patched('cancel-anywhere')), one with the code that takes that path (cancel-anywhere.test.ts);
// and a follow-up cancelled while it compensated, with 1.0 (cut short) and since (it finishes, patched);
// and, from 2.0, one per way a checkout run ends or waits: completed, declined, rejected, reconciled after a lost
// answer, parked, parked then compensated on a decision, abandoned, cancelled and compensated
// (test/integration/checkout.test.ts); a refund abandoned on a decision; follow-ups that found nothing to undo and
// that handed a checkout's failed refund to a person. The first test reads each saga's endings from the histories.
// Recordings are written decoded (through the codec server). From 1.0
// on, a change to workflow logic is guarded with patched() and keeps these recordings replaying; add a
// recording for a new way a run ends (docs/reliability.md, "Versioning"):
//   RECORD_HISTORY=1 npx jest test/integration/<file>.test.ts -t '<case>' --maxWorkers=1
// (refund-approval-expired comes from the workflow tier: test/workflow/decisions.test.ts; batch-started from
// test/integration/schedules.test.ts)
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

test('the recordings cover every way a refund or checkout run ends or waits, a compensating follow-up, and a batch occurrence', () => {
  expect(recorded.map((r) => r.file)).toEqual([
    'batch-started.json',
    'checkout-abandoned.json',
    'checkout-cancelled-compensated.json',
    'checkout-completed.json',
    'checkout-declined.json',
    'checkout-parked-then-compensated.json',
    'checkout-parked.json',
    'checkout-reconciled.json',
    'checkout-refund-pending-before-wait.json',
    'checkout-refund-pending-waited.json',
    'checkout-rejected.json',
    'follow-up-1.0-cancelled-while-compensating.json',
    'follow-up-cancelled-while-compensating.json',
    'follow-up-compensated.json',
    'follow-up-needs-attention.json',
    'follow-up-unchanged.json',
    'refund-1.0-cancelled-reading-deciders.json',
    'refund-1.0-cancelled-while-parking.json',
    'refund-1.0-unknown.json',
    'refund-abandoned.json',
    'refund-approval-expired.json',
    'refund-awaited-webhook.json',
    'refund-cancelled-while-parking.json',
    'refund-compensated.json',
    'refund-completed-carried.json',
    'refund-completed-pinned-policy.json',
    'refund-completed-read-first.json',
    'refund-completed.json',
    'refund-parked-then-decided.json',
    'refund-reconciled.json',
    'refund-rejected.json',
    'refund-unknown.json',
  ]);
  // The follow-up's histories replay too: the replay worker runs every workflow the worker does.
  const types = recorded.map(
    ({ history }) => history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name,
  );
  expect(new Set(types)).toEqual(
    new Set(['refundWorkflow', 'followUpWorkflow', 'batchRefundsWorkflow', 'checkoutWorkflow']),
  );
  // Read from the histories themselves: each saga's recordings end every way it can, or wait.
  const endings = (type: string) =>
    new Set(recorded.filter((_, i) => types[i] === type).map(({ history }) => endingOf(history)));
  const saga = ['completed', 'rejected', 'compensated', 'abandoned', 'cancelled', 'open'];
  expect([...endings('refundWorkflow')].sort()).toEqual([...saga, 'stopped'].sort());
  expect([...endings('checkoutWorkflow')].sort()).toEqual([...saga].sort());
  expect([...endings('followUpWorkflow')].sort()).toEqual(['cancelled', 'compensated', 'needs_attention', 'unchanged']);
});

/**
 * How a recorded run ended: its result's status, `cancelled`, `open` (its last task done, it waited for a person or
 * the provider), or the name of whatever else closed it (failed, terminated…), which no saga's endings list.
 */
function endingOf(history: (typeof recorded)[number]['history']): string {
  const last = history.events?.at(-1);
  const result = last?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0]?.data;
  if (result) return (JSON.parse(Buffer.from(result).toString()) as { status?: string }).status ?? 'returned';
  if (last?.workflowExecutionCanceledEventAttributes) return 'cancelled';
  if (last?.workflowTaskCompletedEventAttributes) return 'open';
  return Object.keys(last ?? {}).find((k) => k.endsWith('Attributes')) ?? 'no events';
}

test('every recorded history replays against the current workflow code', async () => {
  // The suite's bundle of today's sources (test/global-setup.ts), the code every worker of the run loads:
  // bundling the same sources again here cost seconds of CPU. Without it, the sources are bundled here.
  const bundle = process.env.TEST_WORKFLOW_BUNDLE;
  const current = bundle ? { workflowBundle: { codePath: bundle } } : require.resolve('../../src/workflows');
  expect(await replayAll(current)).toEqual([]);
});

test('the bundle `npm run bundle` writes for production workers replays every recorded history', async () => {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bundle-')), 'workflow-bundle.js');
  const root = path.join(__dirname, '..', '..');
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', path.join(root, 'src', 'build', 'bundle-workflows.ts'), '--out', out],
    { timeout: 120_000 },
  );
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
  for (const activitySide of ['circuit-breaker', 'policy-file', 'attempt', 'completion-gate'])
    expect(code).not.toMatch(new RegExp(`/\\*\\*\\*/ "\\./src/[a-z/-]+/${activitySide}\\.ts"`));
  expect(code).toMatch(/\/\*\*\*\/ "\.\/src\/workflows\/refund\/workflow\.ts"/);
  fs.rmSync(path.dirname(out), { recursive: true, force: true });
});

/** The recordings that failed to replay, each with the name of its error. */
async function replayAll(workflows: string | Pick<ReplayWorkerOptions, 'workflowBundle'>): Promise<string[]> {
  return (await replayErrors(workflows)).map(([file]) => file);
}

async function replayErrors(
  workflows: string | Pick<ReplayWorkerOptions, 'workflowBundle'>,
): Promise<[string, string][]> {
  const options = typeof workflows === 'string' ? { workflowsPath: workflows } : workflows;
  const results = Worker.runReplayHistories(
    options,
    recorded.map(({ file, history }) => ({ workflowId: file, history })),
  );
  const failed: [string, string][] = [];
  for await (const result of results) if (result.error) failed.push([result.workflowId, result.error.name]);
  return failed;
}

test('the replay fails for a workflow that changed incompatibly', async () => {
  await expect(
    Worker.runReplayHistory(
      { workflowsPath: require.resolve('../fixtures/reordered-workflow') },
      recorded.find((r) => r.file === 'refund-completed.json')!.history,
    ),
  ).rejects.toThrow(DeterminismViolationError);
});

test('a new step added without patched() breaks every recorded run, as nondeterminism; the same step behind patched() breaks none', async () => {
  expect(await replayErrors(require.resolve('../fixtures/unpatched-change'))).toEqual(
    recorded.map((r) => [r.file, 'DeterminismViolationError']),
  );
  expect(await replayAll(require.resolve('../fixtures/patched-change'))).toEqual([]);
});
