// One PostgreSQL server for the whole run, on 127.0.0.1; each test file creates its own databases
// on it (test/helpers/databases.ts). Its URL reaches the test workers through the environment.
// The workflow code is bundled once too, from the sources as they are now, for every file's workers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPostgres, type PostgresServer } from '../tools/src/stack/postgres';
import { bundleRefundWorkflows } from '../src/worker';

declare global {
  var testPostgres: PostgresServer | undefined;
  var testBundleDir: string | undefined;
}

export default async function globalSetup(): Promise<void> {
  if (!process.env.TEST_WORKFLOW_BUNDLE) {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-bundle-')), 'workflow-bundle.js');
    fs.writeFileSync(file, await bundleRefundWorkflows());
    process.env.TEST_WORKFLOW_BUNDLE = file;
    globalThis.testBundleDir = path.dirname(file);
  }
  if (process.env.TEST_POSTGRES_URL) return;
  globalThis.testPostgres = await startPostgres();
  process.env.TEST_POSTGRES_URL = globalThis.testPostgres.url;
}
