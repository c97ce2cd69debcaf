// The short chaos run CI makes: refunds and checkouts through a stack of their own under random Toxiproxy and
// semantic faults, worker processes SIGKILLed and replaced, duplicate starts; every invariant must
// hold, checked from the evidence. It runs once with the workers on a SQLite file and once on a
// PostgreSQL server of its own. `npm run chaos -- --runs 1000` is the long version.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runChaos } from '../../tools/src/chaos/run';
import type { Dialect } from '../../src/store';

jest.setTimeout(480_000);

test.each<Dialect>(['sqlite', 'postgres'])(
  'a short chaos run on %s (fixed seed): no duplicate refund or email, no lost run, budgets kept, no retry storm, states that match the evidence',
  async (database) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-chaos-test-'));
    try {
      const report = await runChaos({
        runs: Number(process.env.CHAOS_TEST_RUNS ?? 25),
        concurrency: 8,
        faultRate: 0.3,
        killEveryMs: 10_000,
        workers: 2,
        duplicateRate: 0.1,
        seed: 20261130,
        timeLimitMs: 240_000,
        graceMs: 90_000,
        dir,
        database,
        ...(process.env.TEST_WORKFLOW_BUNDLE && {
          workflowBundle: fs.readFileSync(process.env.TEST_WORKFLOW_BUNDLE, 'utf8'),
        }),
      });
      const broken = report.invariants
        .filter((i) => !i.holds)
        .map((i) => `${i.name}: ${i.violations.slice(0, 5).join('; ')}`);
      expect(broken).toEqual([]);
      // The faults and kills really happened, and the runs settled.
      expect(report.workerKills).toBeGreaterThanOrEqual(1);
      expect(Object.values(report.faults).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(10);
      expect(report.outcomes.completed).toBeGreaterThan(0);
      expect(report.outcomes['not settled']).toBeUndefined();
      // Every fourth run is a checkout, with its own invariants among those above.
      expect(report.outcomes['checkout completed']).toBeGreaterThan(0);
      expect(report.outcomes['checkout not settled']).toBeUndefined();
      expect(report.invariants.filter((i) => i.name.startsWith('checkout:')).every((i) => i.checked > 0)).toBe(true);
      expect(report.options.database).toBe(database);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
);
