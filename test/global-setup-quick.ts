// What every tier needs: the workflow code bundled once, from the sources as they are now, for
// every file's workers, the sources compiled once for the CLI and worker processes tests start
// (test/helpers/compiled.ts), and one Temporal dev server for the whole run (test/helpers/temporal.ts),
// each file in a namespace of its own. Their addresses reach the test workers through the environment.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleRefundWorkflows } from '../src/worker-pools';
import { compileSources } from './helpers/compiled';
import { startSharedServer, type SharedServer } from './helpers/temporal';

declare global {
  var testBundleDir: string | undefined;
  var testTemporal: SharedServer | undefined;
}

export default async function globalSetup(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-suite-'));
  globalThis.testBundleDir = dir;
  const bundling = process.env.TEST_WORKFLOW_BUNDLE
    ? Promise.resolve()
    : bundleRefundWorkflows().then((code) => {
        const file = path.join(dir, 'workflow-bundle.js');
        fs.writeFileSync(file, code);
        process.env.TEST_WORKFLOW_BUNDLE = file;
      });
  const compiling = process.env.TEST_COMPILED_SRC
    ? Promise.resolve()
    : compileSources(path.join(dir, 'app')).then((app) => (process.env.TEST_COMPILED_SRC = app));
  // The server starts while the bundler works.
  const starting = process.env.TEST_TEMPORAL_ADDRESS
    ? Promise.resolve()
    : startSharedServer(path.join(dir, 'namespaces')).then((server) => {
        globalThis.testTemporal = server;
        process.env.TEST_TEMPORAL_ADDRESS = server.address;
        process.env.TEST_TEMPORAL_CLAIMS = server.claims;
      });
  await Promise.all([bundling, compiling, starting]);
}
