// npm run bench: the bare, project and naive variants side by side on one stack of its own
// (127.0.0.1 only), without and with faults, then how costs grow; JSON and Markdown reports.
import { Command, Option } from 'commander';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { SingleBar, Presets } from 'cli-progress';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../../src/config';
import type { FaultMode } from '../bench/matrix';
import { renderReport } from '../bench/report';
import { runBench, type BenchReport } from '../bench/run';
import { wholeNumber, wholeNumbers } from './options';

const program = new Command('bench')
  .description(
    'Measure the refund workflow against a bare Temporal workflow of the same shape and a naive retry-everything design, side by side.',
  )
  .option('--concurrency <list>', 'runs in flight at once, for each cell', wholeNumbers(1, 200), [1, 10, 50])
  .option(
    '--runs <n>',
    'runs per variant and turn at concurrency 1 (at concurrency c: at least 4c, so that most of a turn runs with every slot busy)',
    wholeNumber(1, 10_000),
    20,
  )
  .option(
    '--rounds <n>',
    'turns of each cell without faults, each starting with the next variant (ABC, BCA, CAB…); cells with faults run in one',
    wholeNumber(1, 100),
    3,
  )
  .addOption(
    new Option('--faults <mode>', 'without faults, with them, or both')
      .choices(['both', 'none', 'faults'])
      .default('both'),
  )
  .option('--replay <list>', 'histories replayed, for each size', wholeNumbers(0, 100_000), [100, 1000])
  .option(
    '--parked <list>',
    'parked runs listed and swept, for each size (ascending)',
    wholeNumbers(0, 100_000),
    [100, 300],
  )
  .option('--sweep-max-runs <n>', 'runs one sweep occurrence asks at most', wholeNumber(1, 1000), 1000)
  .option(
    '--long-wait <seconds>',
    "how long the long-waiting run's refund stays pending at the provider",
    wholeNumber(1, 3600),
    15,
  )
  .option(
    '--segment-timeout <seconds>',
    'a run not settled this long after its segment began counts as not settled',
    wholeNumber(10, 3600),
    180,
  )
  .option(
    '--baseline <checkout>',
    "an earlier build's checkout (a git worktree with its node_modules) whose refund workflow runs beside this one's, without faults",
  )
  .option('--smoke', 'a few runs of everything, to check that the command works (figures mean little)')
  .option('--out <dir>', 'where report.json and report.md go', path.join(PROJECT_ROOT, 'docs', 'bench'))
  .showHelpAfterError();

interface Opts {
  concurrency: number[];
  runs: number;
  rounds: number;
  faults: 'both' | FaultMode;
  replay: number[];
  parked: number[];
  sweepMaxRuns: number;
  longWait: number;
  segmentTimeout: number;
  smoke?: boolean;
  baseline?: string;
  out: string;
}

/** The baseline checkout and its name in the report: its version and commit. */
function baselineOf(dir: string): { dir: string; label: string } {
  const at = path.resolve(dir);
  if (!fs.existsSync(path.join(at, 'src', 'worker.ts')) || !fs.existsSync(path.join(at, 'node_modules')))
    program.error(`bench: --baseline ${dir}: not a checkout with src/worker.ts and node_modules`, { exitCode: 2 });
  const { version } = JSON.parse(fs.readFileSync(path.join(at, 'package.json'), 'utf8')) as { version: string };
  const commit = execFileSync('git', ['-C', at, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  return { dir: at, label: `${version} (${commit})` };
}

async function main() {
  const o = program.parse().opts<Opts>();
  // The replay workers' lifecycle lines would bury the progress bar.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  if (o.smoke)
    Object.assign(o, { concurrency: [2], runs: 2, rounds: 1, replay: [5], parked: [3], longWait: 3, sweepMaxRuns: 3 });
  if (o.parked.some((n, i) => i > 0 && n < o.parked[i - 1]!))
    program.error('bench: --parked sizes must ascend', { exitCode: 2 });
  // A killed baseline worker could not start again: this build has migrated its store past what it knows.
  if (o.baseline && o.faults !== 'none')
    program.error('bench: --baseline runs without faults: add --faults none', { exitCode: 2 });
  const baseline = o.baseline ? baselineOf(o.baseline) : undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-bench-'));
  const bar = new SingleBar(
    {
      format: 'bench [{bar}] {value}/{total} runs | {phase} | {duration_formatted}',
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 10_000,
    },
    Presets.shades_classic,
  );
  let phase = 'starting';
  bar.start(1, 0, { phase });
  let report: BenchReport;
  try {
    report = await runBench(
      {
        matrix: {
          concurrency: o.concurrency,
          runs: o.runs,
          rounds: o.rounds,
          faultModes: o.faults === 'both' ? ['none', 'faults'] : [o.faults],
          segmentTimeoutMs: o.segmentTimeout * 1000,
        },
        scale: {
          replay: o.replay.filter((n) => n > 0),
          parked: o.parked.filter((n) => n > 0),
          sweepMaxRuns: o.sweepMaxRuns,
          longWaitMs: o.longWait * 1000,
        },
        dir,
        baseline,
        command: ['npm run bench', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
        workflowBundle: process.env.TEST_WORKFLOW_BUNDLE
          ? fs.readFileSync(process.env.TEST_WORKFLOW_BUNDLE, 'utf8')
          : undefined,
      },
      {
        total: (n) => bar.setTotal(n),
        tick: () => bar.increment(1, { phase }),
        phase: (name) => {
          phase = name;
          bar.update({ phase });
        },
      },
    );
  } finally {
    bar.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  fs.mkdirSync(o.out, { recursive: true });
  const markdown = renderReport(report);
  fs.writeFileSync(path.join(o.out, 'report.json'), JSON.stringify(report, null, 2) + '\n');
  fs.writeFileSync(path.join(o.out, 'report.md'), markdown);
  console.log(`\n${markdown}\nreports: ${path.join(o.out, 'report.md')}, ${path.join(o.out, 'report.json')}`);
}

// As in npm run chaos: a Temporal client retry firing after its connection closed must not take the report with it.
process.on('uncaughtException', (err) => {
  if (err.message === 'Channel has been shut down') return;
  console.error(err);
  process.exit(2);
});

main().catch((err: unknown) => {
  console.error(`bench: ${(err as Error).message}`);
  process.exit(2);
});
