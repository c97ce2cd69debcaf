// What a worker says once it polls: every setting that decides how it treats money and messages, in one log line.
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { Config } from '../config';
import type { Keyring } from '../codec/keyring';
import type { RunSettings } from '../contract';

export function startLineFields(
  config: Config,
  settings: RunSettings,
  keyring: Keyring | undefined,
  deployment: WorkerDeploymentVersion | undefined,
  shutdownGraceMs: number,
): Record<string, unknown> {
  return {
    namespace: config.temporal.namespace,
    deployment: deployment
      ? `${deployment.deploymentName}:${deployment.buildId} (pinned)`
      : 'unversioned (WORKER_VERSIONING=off)',
    scope: settings.scope,
    policy: settings.policy.version,
    database: config.databaseUrl.split(':')[0],
    tracing: config.tracing.exporter,
    metrics: config.metrics.prometheusAddress
      ? `prometheus on http://${config.metrics.prometheusAddress}/metrics`
      : (config.metrics.otlpUrl ?? 'off'),
    payloads: keyring
      ? `encrypted with key ${keyring.current}; plaintext ${config.encryption.plaintext === 'reject' ? 'refused' : 'allowed (PAYLOAD_PLAINTEXT=allow)'}`
      : 'plaintext (PAYLOAD_ENCRYPTION=off)',
    storeFaults: config.faultInjection,
    slots: config.worker.slots,
    decisions: config.unsignedDecisions
      ? 'unsigned ones accepted (DECISIONS_UNSIGNED=allow: local development only)'
      : 'signed only',
    shutdownGraceMs,
    stickyTimeoutMs: config.worker.stickyTimeoutMs,
  };
}
