// Replays a recorded history of the refund workflow against today's workflow code: a change
// that would break runs already in flight fails here. Refresh the recording only for an
// intentional, patched() change: RECORD_HISTORY=1 npx jest test/integration/refund-workflow.test.ts
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import fs from 'node:fs';
import path from 'node:path';

const history = historyFromJSON(JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'histories', 'refund-completed.json'), 'utf8')));

test('the recorded refund history replays against the current workflow code', async () => {
  await expect(
    Worker.runReplayHistory({ workflowsPath: require.resolve('../../src/workflows') }, history),
  ).resolves.toBeUndefined();
});

test('the replay fails for a workflow that changed incompatibly', async () => {
  await expect(
    Worker.runReplayHistory({ workflowsPath: require.resolve('../fixtures/reordered-workflow') }, history),
  ).rejects.toThrow(DeterminismViolationError);
});
