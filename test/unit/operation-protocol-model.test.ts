// The model of the operation protocol (test/model/protocol-model.ts): generated interleavings of two
// operation versions of one order, stalls, worker deaths, a provider that commits late or cuts the
// connection, skewed clocks, against the real store and payment activities. A bounded, seeded run
// here; `npm run model -- --runs 5000` runs many more. A failure prints fast-check's seed and replay
// path, the shrunk counterexample (the commands), and what happened in it.
import { checkProtocol } from '../model/protocol-model';

const RUNS = Number(process.env.MODEL_RUNS ?? 300);
const SEED = Number(process.env.MODEL_SEED ?? 20261202);

test(`the operation protocol keeps its invariants through ${RUNS} generated cases (seed ${SEED})`, async () => {
  await expect(checkProtocol({ runs: RUNS, seed: SEED })).resolves.toMatchObject({ seed: SEED });
}, 180_000);
