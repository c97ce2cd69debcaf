// npm run chaos: refunds through a stack of its own under injected faults, worker kills and
// duplicate starts, then the invariants checked from the evidence; a table and a JSON report.
import { Command, InvalidArgumentError, Option } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runChaos, type ChaosReport } from '../chaos/run';
import { PROJECT_ROOT } from '../../../src/config';
import type { Dialect } from '../../../src/store';
import { wholeNumber } from './options';

const share = (v: string) => {
  const n = Number(v);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError('must be a number from 0 to 1');
  return n;
};

const program = new Command('chaos')
  .description(
    'Drive refunds and checkouts through a stack of its own (127.0.0.1 only) under random faults and worker kills, then check the invariants.',
  )
  .option('--runs <n>', 'runs to drive (every fourth a checkout)', wholeNumber(1, 10_000), 100)
  .option('--concurrency <n>', 'runs in flight at once', wholeNumber(1, 64), 8)
  .option('--fault-rate <p>', 'chance of a new fault at each 250 ms tick', share, 0.3)
  .option(
    '--kill-every <seconds>',
    'SIGKILL a random worker and start another this often (0: never)',
    wholeNumber(0, 3600),
    20,
  )
  .option('--workers <n>', 'worker processes', wholeNumber(1, 8), 2)
  .option(
    '--duplicate-rate <p>',
    'share of refunds also started twice at once, and (half as often) under another workflow id',
    share,
    0.1,
  )
  .option('--seed <n>', 'seed for the faults and the runs, to repeat a run', wholeNumber(0, 2 ** 31), 1)
  .option(
    '--time-limit <seconds>',
    'refunds are started and faults injected within this',
    wholeNumber(10, 24 * 3600),
    1800,
  )
  .option(
    '--grace <seconds>',
    'after the faults stop, how long runs still going may take to settle',
    wholeNumber(10, 3600),
    120,
  )
  .addOption(
    new Option('--database <kind>', "the workers' order store: a SQLite file, or a PostgreSQL server of the run's own")
      .choices(['sqlite', 'postgres'])
      .default('sqlite'),
  )
  .option('--report <file>', 'where to write the JSON report', path.join(PROJECT_ROOT, '.data', 'chaos', 'report.json'))
  .showHelpAfterError();

function print(report: ChaosReport): void {
  console.log(
    `\nchaos: ${report.options.runs} runs on ${report.options.database ?? 'sqlite'}, seed ${report.options.seed}, ${Math.round(report.durationMs / 1000)} s, ${report.workerKills} worker kills, ` +
      `${report.duplicateStarts.sameId} + ${report.duplicateStarts.otherId} duplicate starts`,
  );
  if (report.toxiproxyCrashes.length > 0) {
    console.log(
      `toxiproxy-server exited on its own ${report.toxiproxyCrashes.length} time(s) and was started again; its last words are in the report`,
    );
  }
  console.log(`unknown email hand-overs settled from the message log, without a person: ${report.handOversReconciled}`);
  console.table(report.outcomes);
  console.table(report.faults);
  console.table(
    report.invariants.map((i) => ({
      invariant: i.name,
      holds: i.holds ? 'yes' : 'NO',
      checked: i.checked,
      violations: i.violations.length,
    })),
  );
  for (const i of report.invariants.filter((x) => !x.holds))
    for (const v of i.violations) console.log(`  ${i.name}: ${v}`);
}

async function main() {
  const o = program.parse().opts<{
    runs: number;
    concurrency: number;
    faultRate: number;
    killEvery: number;
    workers: number;
    duplicateRate: number;
    seed: number;
    timeLimit: number;
    grace: number;
    database: Dialect;
    report: string;
  }>();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-chaos-'));
  // On a terminal a live bar; in a log, a line every 10 s.
  const bar = new SingleBar(
    {
      format: 'chaos [{bar}] {value}/{total} runs settled | {duration_formatted}',
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 10_000,
    },
    Presets.shades_classic,
  );
  bar.start(o.runs, 0);
  let report: ChaosReport;
  try {
    report = await runChaos(
      {
        runs: o.runs,
        concurrency: o.concurrency,
        faultRate: o.faultRate,
        killEveryMs: o.killEvery * 1000,
        workers: o.workers,
        duplicateRate: o.duplicateRate,
        seed: o.seed,
        timeLimitMs: o.timeLimit * 1000,
        graceMs: o.grace * 1000,
        dir,
        database: o.database,
      },
      (settled) => bar.update(settled),
    );
  } finally {
    bar.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  print(report);
  fs.mkdirSync(path.dirname(o.report), { recursive: true });
  fs.writeFileSync(o.report, JSON.stringify(report, null, 2));
  console.log(`report: ${o.report}`);
  process.exitCode = report.holds ? 0 : 1;
}

// The Temporal client can throw from a retry timer that fires after its channel closed, once the
// evidence is read; that must not take a long run's report with it. Anything else still stops us.
process.on('uncaughtException', (err) => {
  if (err.message === 'Channel has been shut down') {
    console.error(
      'chaos: a Temporal client retry fired after its connection closed (ignored: the evidence was already read)',
    );
    return;
  }
  console.error(err);
  process.exit(2);
});

main().catch((err: unknown) => {
  console.error(`chaos: ${(err as Error).message}`);
  process.exit(2);
});
