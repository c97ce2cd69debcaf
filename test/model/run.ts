// npm run model -- --runs 5000 [--seed N] [--check proof,refunds,claims] [--verbose]
// Runs the model of the operation protocol (protocol-model.ts) for as many cases as asked; a failure
// prints fast-check's report: the seed and path to replay it, and the shrunk counterexample.
import { Command } from 'commander';
import { checkProtocol, INVARIANTS, type Invariant } from './protocol-model';

const program = new Command('model')
  .option('--runs <n>', 'cases to generate', (v) => Number(v), 1000)
  .option('--seed <n>', 'the seed (printed by a failure) to replay', (v) => Number(v))
  .option(
    '--check <list>',
    `invariants to check, of ${INVARIANTS.join(', ')}`,
    (v) => v.split(',') as Invariant[],
    INVARIANTS,
  )
  .option('--verbose', 'print every case fast-check tried while shrinking')
  .parse();
const opts = program.opts<{ runs: number; seed?: number; check: Invariant[]; verbose?: boolean }>();

const started = Date.now();
checkProtocol({ runs: opts.runs, seed: opts.seed, checks: opts.check, verbose: opts.verbose }).then(
  ({ seed, cases }) => {
    console.log(`${cases} cases passed with seed ${seed} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  },
  (err: unknown) => {
    console.error((err as Error).message);
    process.exitCode = 1;
  },
);
