// Every tier (`npm test`) but the short chaos run: unit, workflow logic (test/workflow, stubbed activities), the stack
// (test/integration: real servers, store, faults, kills) and end to end (test/e2e). One Temporal
// dev server and one PostgreSQL server for the whole run (test/global-setup.ts). docs/testing.md.
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
  },
  setupFiles: ['<rootDir>/test/setup.ts'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  // The slowest files first on a fresh clone too, so that none runs alone at the end.
  testSequencer: '<rootDir>/jest.sequencer.js',
  // The short chaos run is a long run's short version: `npm run test:chaos`, which .ci/run runs after this.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/integration/chaos.test.ts'],
};
