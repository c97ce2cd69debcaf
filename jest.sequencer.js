// Jest runs the longest files first once it has their durations from an earlier run (its cache).
// A fresh clone has none, and jest then orders by file size: a short file that runs long would start
// last and run alone at the end. Until jest has timings of its own, these weights (seconds each file
// took in a fresh-clone `npm test`, docs/testing.md) order the slow files first.
const Sequencer = require('@jest/test-sequencer').default;

const WEIGHTS = {
  'integration/worker-kills.test.ts': 103,
  'e2e/demo.test.ts': 84,
  'integration/walkthrough.test.ts': 73,
  'e2e/production-install.test.ts': 70,
  'integration/inspect.test.ts': 59,
  'integration/decisions.test.ts': 55,
  'integration/checkout.test.ts': 45,
  'e2e/operator-cli.test.ts': 42,
  'integration/schedules.test.ts': 41,
  'integration/batch-postgres.test.ts': 35,
  'integration/replay.test.ts': 32,
  'integration/notifications-activities.test.ts': 32,
  'integration/bulkheads.test.ts': 31,
  'integration/cancel-anywhere.test.ts': 31,
  'integration/provider-lifecycle.test.ts': 30,
  'integration/malformed-messages.test.ts': 29,
  'e2e/web-ui.test.ts': 26,
  'integration/payload-encryption.test.ts': 25,
  'e2e/refund-cli.test.ts': 25,
  'integration/rollout.test.ts': 24,
  'integration/send-deadline.test.ts': 24,
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
