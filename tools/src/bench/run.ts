// npm run bench, start to end: one stack, the three variants side by side, then how costs grow
// with the work (replay, parked runs, a long wait); one report.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../../src/config';
import { CHAOS_POLICY, startChaosStack } from '../chaos/chaos-stack';
import { DEFAULT_POLICY } from '../../../src/reliability/default-policy';
import type { RecoveryPolicy } from '../../../src/reliability/policy';
import { devServerArgs } from '../stack/assembly';
import { findTool } from '../stack/tools';
import {
  machineCpuMsPerRun,
  runMatrix,
  startVariantWorkers,
  type MatrixOptions,
  type CellResult,
  runsAt,
} from './matrix';
import { runCheckoutCell, type CheckoutCell } from './checkouts';
import { measureScale, type ScaleOptions, type ScaleResult } from './scale';

/**
 * The refund workers' policy in the bench: the shipped policy, with the bare shape's activity
 * timeouts (a killed worker's activity is retried after the same wait in every variant).
 */
export const BENCH_POLICY: RecoveryPolicy = {
  ...DEFAULT_POLICY,
  version: `${DEFAULT_POLICY.version}-bench`,
  timeouts: CHAOS_POLICY.timeouts,
};

/** Stripe's own key window: the project runs as shipped. */
const KEY_TTL_MS = 24 * 3600_000;

export interface BenchOptions {
  matrix: MatrixOptions;
  scale: ScaleOptions;
  dir: string;
  workflowBundle?: string;
  /** An earlier build's checkout whose refund workflow runs beside this one's, and how the report names it. */
  baseline?: { dir: string; label: string };
  /** The command line, for the report. */
  command: string;
}

/** One variant's figures over another's. */
export interface Over {
  throughput: number;
  p50: number;
  workerCpu: number;
  machineCpu: number;
}

export interface BenchReport {
  command: string;
  date: string;
  durationMs: number;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; platform: string };
  versions: Record<string, string>;
  options: { matrix: MatrixOptions; scale: ScaleOptions };
  cells: CellResult[];
  ratios: {
    faults: string;
    concurrency: number;
    throughput: number;
    p50: number;
    events: number;
    workerCpu: number;
    machineCpu: number;
    /** The project over bare with the platform features it uses: what the money protocol alone costs. */
    againstPlatform: Over;
    /** This build's refund workflow over the baseline build's, when one ran. */
    againstBaseline?: Over;
  }[];
  /** The baseline build's name in the report, when one ran. */
  baseline?: string;
  /** The checkout saga under the same faults, at each concurrency (none without faults). */
  checkouts: CheckoutCell[];
  scale: ScaleResult;
}

function versions(): Record<string, string> {
  const pkg = (name: string) =>
    (
      JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as {
        version: string;
      }
    ).version;
  const args = devServerArgs({ port: 0, uiPort: 0, headless: true, logLevel: 'warn' });
  const dynamicConfig = args.filter((_, i) => args[i - 1] === '--dynamic-config-value');
  let temporalCli = 'unknown';
  try {
    temporalCli = execFileSync(findTool('temporal'), ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    // The report says unknown.
  }
  return {
    node: process.version,
    '@temporalio/worker': pkg('@temporalio/worker'),
    stripe: pkg('stripe'),
    nodemailer: pkg('nodemailer'),
    temporal: temporalCli,
    // The dev server's dynamic config as the stack sets it (none set: start-dev's defaults).
    'temporal dynamic config': dynamicConfig.length ? dynamicConfig.join(' ') : "start-dev's defaults",
  };
}

const over = (b: CellResult, a: CellResult): Over => ({
  throughput: b.throughput / a.throughput,
  p50: b.latencyMs.p50 / a.latencyMs.p50,
  workerCpu: b.worker.cpuMsPerRun / a.worker.cpuMsPerRun,
  machineCpu: machineCpuMsPerRun(b) / machineCpuMsPerRun(a),
});

/** The project's figures over bare's, bare+platform's and the baseline's, cell by cell. */
export function ratiosOf(
  cells: CellResult[],
  m: Pick<MatrixOptions, 'faultModes' | 'concurrency'>,
): BenchReport['ratios'] {
  const withBaseline = cells.some((c) => c.variant === 'baseline');
  return m.faultModes.flatMap((faults) =>
    m.concurrency.map((concurrency) => {
      const cell = (v: string) =>
        cells.find((c) => c.variant === v && c.faults === faults && c.concurrency === concurrency)!;
      const [a, b] = [cell('bare'), cell('project')];
      return {
        faults,
        concurrency,
        ...over(b, a),
        events: b.history.eventsPerRun / a.history.eventsPerRun,
        againstPlatform: over(b, cell('platform')),
        ...(withBaseline && { againstBaseline: over(b, cell('baseline')) }),
      };
    }),
  );
}

export async function runBench(
  opts: BenchOptions,
  progress: { total(n: number): void; tick(): void; phase(name: string): void },
): Promise<BenchReport> {
  const started = Date.now();
  const versionsUsed = versions();
  const smtpTries = new Map<string, number>();
  progress.phase('starting the stack');
  const stack = await startChaosStack({
    dir: opts.dir,
    workers: 0,
    workflowBundle: opts.workflowBundle,
    policy: BENCH_POLICY,
    temporalInMemory: true,
    idempotencyTtlMs: KEY_TTL_MS,
    // The long-wait run's pending refund settles after this.
    lifecycle: { settleDelayMs: opts.scale.longWaitMs },
    // Every RCPT TO is a try to deliver, counted at the server; nothing is failed here.
    mailFaults: (stage, address) => {
      if (stage === 'rcpt' && address) smtpTries.set(address, (smtpTries.get(address) ?? 0) + 1);
      return undefined;
    },
  });
  try {
    const workers = await startVariantWorkers(stack, smtpTries, opts.baseline?.dir);
    try {
      const m = opts.matrix;
      const withCheckouts = m.faultModes.includes('faults') && workers.variants.includes('project');
      progress.total(
        m.faultModes.reduce(
          (n, mode) => n + m.concurrency.reduce((a, c) => a + runsAt(m, c) * (mode === 'none' ? m.rounds : 1), 0),
          0,
        ) * workers.variants.length,
      );
      progress.phase('variants side by side');
      const matrix = await runMatrix(stack, workers, m, () => progress.tick());
      // The checkout saga under the same faults, at each concurrency, on the project's worker.
      const checkouts: CheckoutCell[] = [];
      for (const c of withCheckouts ? m.concurrency : []) {
        progress.phase(`checkouts under faults at ${c}`);
        checkouts.push(await runCheckoutCell(stack, workers, c, runsAt(m, c), m.segmentTimeoutMs));
      }
      const scale = await measureScale(stack, matrix.projectHistories, opts.scale, progress.phase);
      const ratios = ratiosOf(matrix.cells, m);
      return {
        command: opts.command,
        date: new Date(started).toISOString(),
        durationMs: Date.now() - started,
        machine: {
          cpus: os.cpus().length,
          cpuModel: os.cpus()[0]?.model ?? 'unknown',
          memoryGiB: Math.round(os.totalmem() / 2 ** 30),
          platform: `${os.platform()} ${os.release()}`,
        },
        versions: versionsUsed,
        options: { matrix: m, scale: opts.scale },
        cells: matrix.cells,
        ratios,
        checkouts,
        ...(opts.baseline && { baseline: opts.baseline.label }),
        scale,
      };
    } finally {
      await workers.stop();
    }
  } finally {
    await stack.close();
  }
}
