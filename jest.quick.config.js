// The quick tier (`npm run test:quick`): unit tests and workflow logic with stubbed activities.
// Its global setup bundles the workflows and starts the shared Temporal dev server; no PostgreSQL,
// no Stripe or SMTP stand-ins. `npm test` runs it and the full stack (jest.config.js).
const full = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  ...full,
  roots: ['<rootDir>/test/unit', '<rootDir>/test/workflow'],
  globalSetup: '<rootDir>/test/global-setup-quick.ts',
  globalTeardown: '<rootDir>/test/global-teardown-quick.ts',
};
