// Jest runs the longest files first once it has their durations from an earlier run (its cache).
// A fresh clone has none, and jest then orders by file size: the chaos run, a short file and the
// longest by far, would start last and run alone at the end. Until jest has timings of its own,
// these weights (seconds under load, relative only; see docs/testing.md) order the slow files first.
const Sequencer = require('@jest/test-sequencer').default;

const WEIGHTS = {
  'integration/chaos.test.ts': 880,
  'integration/inspect.test.ts': 280,
  'e2e/demo.test.ts': 250,
  'integration/walkthrough.test.ts': 230,
  'integration/decisions.test.ts': 150,
  'integration/worker-kills.test.ts': 135,
  'integration/replay.test.ts': 126,
  'integration/provider-lifecycle.test.ts': 106,
  'e2e/operator-cli.test.ts': 100,
  'unit/lint-rules.test.ts': 93,
  'unit/operation-protocol-model.test.ts': 88,
  'e2e/refund-cli.test.ts': 80,
  'integration/refund-workflow.test.ts': 75,
  'integration/queue-import.test.ts': 67,
  'integration/schedules.test.ts': 64,
  'e2e/setup-cluster.test.ts': 62,
  'integration/bulkheads.test.ts': 57,
};

const weight = (test) => {
  const file = test.path.split('/test/').pop();
  return WEIGHTS[file] ?? 0;
};

class SlowFirst extends Sequencer {
  async sort(tests) {
    const sorted = await super.sort(tests);
    if (sorted.some((t) => t.duration != null)) return sorted;
    // Stable: files without a weight keep jest's order (largest first).
    return [...sorted].sort((a, b) => weight(b) - weight(a));
  }
}

module.exports = SlowFirst;
