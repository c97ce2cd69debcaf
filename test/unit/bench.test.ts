// The benchmark's own arithmetic: percentiles, history sizes, the minimum history, the polls the
// shipped policy makes while it waits for a provider.
import { temporal } from '@temporalio/proto';
import { historySize, percentiles, threadCpu } from '../../tools/src/bench/measure';
import { machineCpuMsPerRun, storeCountsIn } from '../../tools/src/bench/matrix';
import { kindOf, statementKind } from '../../src/store/database';
import { Kysely, sql } from 'kysely';
import { BARE_SHAPE_MIN_EVENTS, minimumEvents, renderReport } from '../../tools/src/bench/report';
import { ratiosOf, type BenchReport } from '../../tools/src/bench/run';
import type { CheckoutCell } from '../../tools/src/bench/checkouts';
import type { CellResult } from '../../tools/src/bench/matrix';
import { shippedPolls } from '../../tools/src/bench/scale';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';

test('percentiles are nearest-rank, and an empty sample gives zeros', () => {
  const values = Array.from({ length: 100 }, (_, i) => 100 - i);
  expect(percentiles(values)).toEqual({ p50: 50, p95: 95, p99: 99 });
  expect(percentiles([7])).toEqual({ p50: 7, p95: 7, p99: 7 });
  expect(percentiles([])).toEqual({ p50: 0, p95: 0, p99: 0 });
});

test('a history is counted in events and in the bytes of its protobuf encoding', () => {
  const history = temporal.api.history.v1.History.create({
    events: [
      { eventType: temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED },
      { eventType: temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED },
    ],
  });
  expect(historySize(history)).toEqual({
    events: 2,
    bytes: temporal.api.history.v1.History.encode(history).finish().byteLength,
  });
  expect(historySize(history).bytes).toBeGreaterThan(0);
});

test('the minimum history of n sequential activities is 5 + 6n: 23 for the bare shape', () => {
  expect(minimumEvents(0)).toBe(5);
  expect(BARE_SHAPE_MIN_EVENTS).toBe(23);
});

test('the shipped policy polls a pending refund on its backoff until its deadline', () => {
  const { deadlineMs, poll } = DEFAULT_POLICY.awaitProvider;
  const { polls, deadlineHours } = shippedPolls();
  expect(deadlineHours).toBe(deadlineMs / 3600_000);
  // Doubling from initialMs to maxMs, then every maxMs: never more than the deadline allows at the fastest pace.
  expect(polls).toBeGreaterThan(deadlineMs / poll.maxMs - 1);
  expect(polls).toBeLessThanOrEqual(Math.ceil(deadlineMs / poll.initialMs));
});

test("a run's CPU on the machine is its worker's plus Temporal's, the proxy's and the bench process's", () => {
  const cell = {
    worker: { cpuMs: 500, cpuMsPerRun: 50, peakRssBytes: 0 },
    stackCpuMsPerRun: { temporal: 30, toxiproxy: 4, benchProcess: 8 },
  } as CellResult;
  expect(machineCpuMsPerRun(cell)).toBe(92);
});

test("a process's CPU by thread: this one's main thread has used some, and a process that is gone has none", () => {
  const mine = threadCpu(process.pid)!;
  expect(mine.main).toBeGreaterThan(0);
  expect(Object.keys(mine).sort()).toEqual(['core', 'main', 'other', 'v8', 'workflows']);
  expect(threadCpu(2 ** 30)).toBeUndefined();
});

test("a worker's store counts are read from its /metrics, every series of each counter summed", () => {
  const exposition = [
    '# HELP refunds_store_statements_total SQL statements sent to the store',
    '# TYPE refunds_store_statements_total counter',
    'refunds_store_statements_total{kind="select",service_name="temporal-core-sdk"} 12',
    'refunds_store_statements_total{kind="commit",service_name="temporal-core-sdk"} 4',
    'refunds_store_statements_total_other 99',
    'refunds_store_commits_total{service_name="temporal-core-sdk"} 5',
    'refunds_store_commits_total 1',
  ].join('\n');
  expect(storeCountsIn(exposition)).toEqual({ statements: 16, commits: 6 });
  expect(storeCountsIn('')).toEqual({ statements: 0, commits: 0 });
});

test("a write's commit is counted from its text as written: compiled again only when it begins with an interpolation", () => {
  const compiled: string[] = [];
  const kysely = new Kysely<unknown>({
    dialect: {
      createAdapter: () => ({}) as never,
      createDriver: () => ({}) as never,
      createIntrospector: () => ({}) as never,
      createQueryCompiler: () =>
        ({
          compileQuery: (node: { sqlFragments: string[] }) => {
            compiled.push(node.sqlFragments.join('?'));
            return { sql: 'DELETE FROM t', parameters: [], query: node };
          },
        }) as never,
    },
  });
  expect(kindOf(sql`UPDATE orders SET version = ${2} WHERE id = ${'o1'}`, kysely)).toBe('update');
  expect(kindOf(sql`  insert INTO t VALUES (${1})`, kysely)).toBe('insert');
  expect(compiled).toEqual([]);
  expect(kindOf(sql`${sql.raw('DELETE')} FROM t`, kysely)).toBe('delete');
  expect(compiled).toHaveLength(1);
});

test('a statement is counted by its first keyword, anything else as other', () => {
  expect(statementKind('select * from orders')).toBe('select');
  expect(statementKind('  INSERT INTO t VALUES (1)')).toBe('insert');
  expect(statementKind('BEGIN IMMEDIATE')).toBe('begin');
  expect(statementKind('with x as (select 1) select * from x')).toBe('other');
  expect(statementKind('')).toBe('other');
});

describe('the project over bare, bare+platform and a baseline build', () => {
  const cell = (variant: CellResult['variant'], throughput: number, cpuMsPerRun: number, concurrency = 10) =>
    ({
      variant,
      faults: 'none',
      concurrency,
      runs: 40,
      completed: 40,
      other: {},
      throughput,
      latencyMs: { p50: 1000 / throughput, p95: 0, p99: 0 },
      history: { eventsPerRun: 23, bytesPerRun: 4000, maxEvents: 23 },
      requests: { effectRequestsPerEffect: 1, allRequestsPerEffect: 1 },
      duplicates: { refunds: 0, emails: 0 },
      injected: { lostAnswers: 0, rateLimits: 0, resets: 0, smtpTransient: 0, workerKills: 0 },
      worker: {
        cpuMs: 0,
        cpuMsPerRun,
        peakRssBytes: cpuMsPerRun << 20,
        threadsMsPerRun: { main: cpuMsPerRun / 2, workflows: cpuMsPerRun / 4, v8: 0, core: cpuMsPerRun / 4, other: 0 },
      },
      store: { statementsPerRun: 7, commitsPerRun: 1 },
      stackCpuMsPerRun: { temporal: 0, toxiproxy: 0, benchProcess: 0 },
    }) as unknown as CellResult;
  const cells = [cell('bare', 20, 40), cell('platform', 16, 50), cell('project', 12, 80), cell('baseline', 12.5, 75)];
  const withoutBaseline = cells.filter((c) => c.variant !== 'baseline');
  const matrix = { faultModes: ['none' as const], concurrency: [10] };

  test('each ratio is the project cell over the other variant of the same cell', () => {
    const [r] = ratiosOf(cells, matrix);
    expect(r).toMatchObject({ faults: 'none', concurrency: 10, throughput: 0.6, workerCpu: 2 });
    expect(r!.againstPlatform).toMatchObject({ throughput: 0.75, workerCpu: 1.6 });
    expect(r!.againstBaseline!.throughput).toBeCloseTo(0.96);
    expect(ratiosOf(withoutBaseline, matrix)[0]).not.toHaveProperty('againstBaseline');
  });

  const report = (baseline?: string, of = cells, concurrency = [10], checkouts: CheckoutCell[] = []) =>
    renderReport({
      command: 'npm run bench',
      date: '2026-12-06T00:00:00.000Z',
      durationMs: 1000,
      machine: { cpus: 2, cpuModel: 'x', memoryGiB: 24, platform: 'linux' },
      versions: {},
      options: {
        matrix: { ...matrix, concurrency, runs: 40, rounds: 1, segmentTimeoutMs: 1000 },
        scale: { replay: [], parked: [], sweepMaxRuns: 1, longWaitMs: 1000 },
      },
      cells: of,
      ratios: ratiosOf(baseline ? of : of.filter((c) => c.variant !== 'baseline'), { ...matrix, concurrency }),
      ...(baseline && { baseline }),
      checkouts,
      scale: {
        replay: [],
        parked: [],
        errors: [],
        longWait: {
          waitedMs: 1000,
          polls: 1,
          events: 30,
          bytes: 1,
          baselineEvents: 26,
          eventsPerPoll: 4,
          shippedPolicy: { deadlineHours: 72, polls: 76, events: 900 },
          parkedDecision: { workflowId: 'w', eventsAtPark: 32, eventsLater: 32, waitedMs: 1000, added: [] },
        },
      },
    } as unknown as BenchReport);

  test('the report names bare+platform and gives a table against the baseline only when one ran', () => {
    const withBaseline = report('1.0 (2880f67)');
    expect(withBaseline).toContain('| bare+platform | 10 | 40/40 | 16.00 |');
    expect(withBaseline).toContain('## Project against bare+platform');
    expect(withBaseline).toMatch(/## Project against 1\.0 \(2880f67\)[\s\S]*\| none \| 10 \| 0\.96 \|/);
    expect(report()).not.toContain('## Project against 1.0');
  });

  test("each worker's CPU is given by thread, the project's with its excess over bare's", () => {
    expect(report()).toContain(
      '| project | 10 | 40.0 (+20.0) | 20.0 (+10.0) | 0.0 (+0.0) | 20.0 (+10.0) | 0.0 (+0.0) | 80.0 |',
    );
    expect(report()).toContain('| bare | 10 | 20.0 | 10.0 | 0.0 | 10.0 | 0.0 | 40.0 |');
  });

  test("the worker's peak RSS over bare's is held to its target at concurrency 50 only", () => {
    const at50 = [cell('bare', 20, 100, 50), cell('platform', 16, 110, 50), cell('project', 18, 140, 50)];
    expect(report(undefined, at50, [50])).toMatch(/\| none \| 50 \| 0\.90 ✓ \|.*\| 1\.40 ✗ \|/);
    expect(report()).toMatch(/\| none \| 10 \| 0\.60 ✗ \|.*\| 2\.00 \|/);
  });

  test('the checkout saga under faults gets its own table, each invariant held or its first violations', () => {
    const invariant = (name: string, violations: string[] = []) => ({
      name: `checkout: ${name}`,
      holds: violations.length === 0,
      checked: 40,
      violations,
    });
    const checkouts: CheckoutCell[] = [
      {
        concurrency: 10,
        checkouts: 40,
        outcomes: { completed: 33, rejected: 6, 'parked (needs_attention)': 1 },
        invariants: [invariant('zero duplicate charges'), invariant('stock taken once', ['c-7: 1 left of 5'])],
        injected: { lostAnswers: 4, rateLimits: 2, resets: 2, smtpTransient: 2, workerKills: 1 },
        durationMs: 9000,
      },
    ];
    expect(report()).not.toContain('## The checkout saga under the same faults');
    const shown = report(undefined, cells, [10], checkouts);
    expect(shown).toContain('## The checkout saga under the same faults');
    expect(shown).toContain('| zero duplicate charges | stock taken once |');
    expect(shown).toContain(
      '| 10 | 40 | 33 completed, 6 rejected, 1 parked (needs_attention) | 40 ✓ | ✗ c-7: 1 left of 5 | 4 / 2 / 2 / 2 / 1 |',
    );
  });
});
