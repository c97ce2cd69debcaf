// Which Worker Deployment Version a worker polls as (WORKER_VERSIONING=on): the deployment is the
// package's name, the build id its version and the workflow bundle's hash, so that two builds with
// different workflow code never share an id, and a rebuild of the same code keeps it.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { WorkerDeploymentOptions } from '@temporalio/worker';
import { PROJECT_ROOT } from '../config';

/** The package's name and version, as package.json gives them (`npm start` runs beside it). */
export function packageInfo(root = PROJECT_ROOT): { name: string; version: string } {
  return JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { name: string; version: string };
}

/** `<version>-<12 hex of the bundle's SHA-256>`, without the inline source map (it names where the checkout was). */
export function buildIdFor(version: string, bundleCode: string): string {
  const map = bundleCode.lastIndexOf(SOURCE_MAP);
  const code = map < 0 ? bundleCode : bundleCode.slice(0, map);
  return `${version}-${createHash('sha256').update(code).digest('hex').slice(0, 12)}`;
}
const SOURCE_MAP = '\n//# sourceMappingURL=';

/** The version this worker polls as: the settings given, the package's and the bundle's for the rest. */
export function deploymentVersion(
  given: { deploymentName?: string; buildId?: string },
  bundleCode: () => string,
  pkg = packageInfo(),
): WorkerDeploymentVersion {
  return {
    deploymentName: given.deploymentName ?? pkg.name,
    buildId: given.buildId ?? buildIdFor(pkg.version, bundleCode()),
  };
}

/**
 * Every pool polls as the same version (its task queues are promoted together), and every run stays pinned to the
 * build that started it, a refund parked for days included: a new build neither replays it nor needs a patch for it.
 * A run started before versioning was on is pinned to the first versioned build that runs it (the worker's default).
 */
export function deploymentOptions(version: WorkerDeploymentVersion | undefined): WorkerDeploymentOptions | undefined {
  return version && { version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' };
}
