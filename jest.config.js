// Every tier (`npm test`) but the short chaos run: unit, workflow logic (test/workflow, stubbed activities), the stack
// (test/integration: real servers, store, faults, kills) and end to end (test/e2e). One Temporal
// dev server and one PostgreSQL server for the whole run (test/global-setup.ts). docs/testing.md.
const { execFileSync } = require('node:child_process');

// Node 22.12 or later (package.json's engines) for jest and for the `node` on PATH, which runs what npm starts.
// `. scripts/use-node.sh` puts one first on PATH: the machine's, or Node 24 in the tools cache.
const supported = (version) => {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 12);
};
const onPath = (() => {
  try {
    return execFileSync('node', ['-p', 'process.version'], { encoding: 'utf8' }).trim();
  } catch {
    return 'missing';
  }
})();
if (!supported(process.version) || !supported(onPath))
  throw new Error(
    `the tests need Node 22.12 or later: jest runs on ${process.version} and \`node\` on PATH is ${onPath}. ` +
      'Run `. scripts/use-node.sh` in this shell first (docs/production.md, "Node and the compiled start").',
  );

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testTimeout: 120_000,
  // Transpile only, with swc: `npm test` type-checks first (`tsc --noEmit`), and tsconfig's isolatedModules keeps
  // every file compilable alone. ts-jest did the same through TypeScript at about 20 times the CPU (docs/testing.md).
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
        module: { type: 'commonjs' },
        sourceMaps: 'inline',
      },
    ],
    // kysely and commander ship ES modules only. Node 22+ requires them from CommonJS itself, jest's module runtime
    // only under --experimental-vm-modules (which every child would inherit): it gets them compiled to CommonJS.
    '/node_modules/(kysely|commander)/.+\\.js$': [
      '@swc/jest',
      { jsc: { target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  transformIgnorePatterns: ['/node_modules/(?!(kysely|commander)/)'],
  setupFiles: ['<rootDir>/test/setup.ts'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  // The slowest files first on a fresh clone too, so that none runs alone at the end.
  testSequencer: '<rootDir>/jest.sequencer.js',
  // The short chaos run is a long run's short version: `npm run test:chaos`, which .ci/run runs after this.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/integration/chaos.test.ts'],
};
