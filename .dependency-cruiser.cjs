// The layer rules: run by `npm run lint` over src/ and tools/src/. Type-only imports count for cycles
// (tsPreCompilationDeps), and are the one way outside code may name what src/workflows/ holds.

/** Tooling: the local stand-ins, the stack, chaos and bench, in tools/ (an npm workspace of the root). */
const TOOLING = '^tools/';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, type-only imports included: a module is understood before what imports it.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'workflows-only-from-worker',
      severity: 'error',
      comment:
        'Only the worker and the bundler load workflow code (the sagas and the harness side that runs inside them): others name a workflow by type (src/contract/queues.ts) and type it with `import type`.',
      from: { path: '^src/', pathNot: ['^src/workflows/', '^src/saga/workflow/', '^src/worker\\.ts$', '^src/build/'] },
      to: { path: '^src/(workflows|saga/workflow)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'contract-imports-only-domain-and-reliability',
      severity: 'error',
      comment:
        "The contract is loaded by workflow code and clients alike: it imports only contract, domain and reliability code, zod, noble's hashes and the Temporal SDK common parts.",
      from: { path: '^src/contract/' },
      to: {
        pathNot: [
          '^src/(contract|domain|reliability)/',
          '^node_modules/(zod|@noble/hashes|@temporalio/(workflow|common))/',
        ],
      },
    },
    {
      name: 'domain-imports-only-domain',
      severity: 'error',
      comment: 'The business facts (the refund request, the order) depend on nothing of ours.',
      from: { path: '^src/domain/' },
      to: { pathNot: ['^src/domain/', '^node_modules/zod/'] },
    },
    {
      name: 'activities-not-to-client',
      severity: 'error',
      comment: 'An activity reads Temporal through src/temporal/, never through client code.',
      from: { path: '^src/activities/' },
      to: { path: '^src/client/' },
    },
    {
      name: 'product-not-to-tooling',
      severity: 'error',
      comment: 'The product never imports tooling (tools/), so a production install needs none of it.',
      from: { path: '^src/' },
      to: { path: TOOLING },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
  },
};
