// The short chaos run (`npm run test:chaos`, in .ci/run after `npm test`): refunds through a stack of
// their own under faults and worker kills, on SQLite and on PostgreSQL. `npm run chaos -- --runs 1000` is the long one.
const full = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  ...full,
  testPathIgnorePatterns: ['/node_modules/'],
  testMatch: ['<rootDir>/test/integration/chaos.test.ts'],
};
