// Jest runs the longest files first once it has their durations from an earlier run (its cache).
// A fresh clone has none, and jest then orders by file size: a short file that runs long would start
// last and run alone at the end. Until jest has timings of its own, these weights (seconds each file
// took in a fresh-clone `npm test`, docs/testing.md) order the slow files first.
const Sequencer = require('@jest/test-sequencer').default;

const WEIGHTS = {
  'e2e/demo.test.ts': 95,
  'integration/worker-kills.test.ts': 91,
  'integration/decisions.test.ts': 64,
  'integration/walkthrough.test.ts': 64,
  'integration/inspect.test.ts': 56,
  'integration/schedules.test.ts': 52,
  'e2e/production-install.test.ts': 51,
  'integration/provider-lifecycle.test.ts': 36,
  'integration/bulkheads.test.ts': 36,
  'integration/batch-postgres.test.ts': 35,
  'integration/notifications-activities.test.ts': 32,
  'integration/malformed-messages.test.ts': 31,
  'e2e/web-ui.test.ts': 28,
  'integration/send-deadline.test.ts': 24,
  'integration/rollout.test.ts': 20,
  'integration/cancel-anywhere.test.ts': 15,
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
