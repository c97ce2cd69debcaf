// Bundles the workflow code once, at build time, into a file a production worker loads with
// WORKFLOW_BUNDLE=… instead of running webpack at every start. The bundle is the exact workflow
// code a worker will replay histories with: build it from the commit you deploy.
import { Command } from 'commander';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../config';
import { bundleRefundWorkflows } from '../worker-pools';
import { buildIdFor, packageInfo } from '../lifecycle/deployment';

const { out } = new Command('bundle')
  .description('Bundle the workflow code into one file for WORKFLOW_BUNDLE.')
  .option('--out <file>', 'where to write the bundle', path.join(PROJECT_ROOT, 'lib', 'workflow-bundle.js'))
  .parse()
  .opts<{ out: string }>();

async function main() {
  const started = Date.now();
  const code = await bundleRefundWorkflows();
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, code);
  const { name, version } = packageInfo();
  console.log(
    `workflow bundle: ${out} (${Math.round(code.length / 1024)} KiB, ${Date.now() - started} ms); start workers with WORKFLOW_BUNDLE=${out}` +
      `\nworker deployment version with WORKER_VERSIONING=on: --deployment-name ${name} --build-id ${buildIdFor(version, code)}`,
  );
}

main().catch((err: unknown) => {
  console.error(`bundle: ${(err as Error).message}`);
  process.exit(1);
});
