// A saga's run stays on the build that started it (Worker Deployment Versioning): its definition
// says PINNED, but only to a versioned worker. The server refuses an unversioned worker's task
// completion that names a behavior ("versioning behavior cannot be specified without deployment
// options"), and such a worker's version has a build id but no deployment name.
import type { WorkflowDefinitionOptions } from '@temporalio/common';
import { workflowInfo } from '@temporalio/workflow';

export function pinnedWhenVersioned(): WorkflowDefinitionOptions {
  return workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: 'PINNED' } : {};
}
