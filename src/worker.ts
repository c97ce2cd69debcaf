// The worker process (`npm start`): its connections, health endpoints, webhook receiver and drain around the pools.
import fs from 'node:fs';
import { NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from './config';
import { requireSearchAttributes } from './temporal/client';
import { openDeps } from './deps';
import { startWebhookReceiver } from './webhooks/receiver';
import { createLogger } from './observability/logging';
import { startHealthServer, workerReadiness } from './observability/health';
import { Drain, FORCE_AFTER_GRACE_MS, shutdownGraceMs } from './lifecycle/drain';
import { deploymentVersion } from './lifecycle/deployment';
import { startLineFields } from './observability/start-line';
import { startTracing } from './observability/tracing';
import { telemetryOptions } from './observability/telemetry';
import { clientDataConverter, payloadKeyring, workerDataConverter } from './codec/data-converter';
import { bundleRefundWorkflows, createRefundWorker } from './worker-pools';

export async function runWorker(): Promise<void> {
  const config = loadConfig();
  if (config.workflowBundle && !fs.existsSync(config.workflowBundle))
    throw new Error(
      `WORKFLOW_BUNDLE ${config.workflowBundle} does not exist: build it with \`npm run bundle\` (or unset WORKFLOW_BUNDLE to bundle at start)`,
    );
  // Every log line of this process is JSON from here on: the SDK's, the Core's, the activities', ours.
  const logger = createLogger(config.logLevel);
  // The drain owns SIGTERM and SIGINT (the SDK's own handler would only stop the pools).
  const telemetry = telemetryOptions(config);
  Runtime.install({ logger, telemetryOptions: telemetry, shutdownSignals: [] });
  await requireSearchAttributes(config);
  const keyring = payloadKeyring(config);
  // The worker refuses plaintext (PAYLOAD_PLAINTEXT); its client, which activities read through, reads any history.
  const dataConverter = clientDataConverter(config, keyring);
  const tracing = startTracing(config.tracing.exporter, config.tracing.serviceName);
  // Scheduled work (the digest, the sweep) reads visibility through a client of its own.
  const [connection, visibility] = await Promise.all([
    NativeConnection.connect(config.temporal.connection),
    Connection.connect(config.temporal.connection),
  ]).catch((err: unknown) => {
    throw new Error(`cannot reach Temporal at ${config.temporal.address} (${(err as Error).message})`, { cause: err });
  });
  const temporal = new Client({
    connection: visibility,
    namespace: config.temporal.namespace,
    dataConverter,
    interceptors: { workflow: tracing.clientInterceptors },
  });
  // The store's statements are counted only where metrics are exported: the runtime's meter is no free no-op.
  const deps = await openDeps(config, temporal, telemetry.metrics ? Runtime.instance().metricMeter : undefined);
  const drain = new Drain(logger, shutdownGraceMs(config.worker.shutdownGraceMs, deps.settings.policy));
  drain.listen();
  let workers: readonly Worker[] = [];
  // The probe's own connection, without the SDK's retries: one try within its deadline, and no retry left
  // pending to fire on a closed channel at shutdown.
  const probe = config.worker.health && (await Connection.connect({ ...config.temporal.connection, interceptors: [] }));
  const health = probe
    ? await startHealthServer(
        workerReadiness({ draining: drain.check, temporal: probe, workers: () => workers, store: deps.store, keyring }),
        config.worker.health!,
      ).catch((err: unknown) => {
        throw new Error(
          `HEALTH_ADDRESS ${config.worker.health!.host}:${config.worker.health!.port}: cannot listen (${(err as Error).message})`,
          { cause: err },
        );
      })
    : undefined;
  if (health) logger.info(`health endpoints on ${health.url}/healthz and ${health.url}/readyz`);
  // Stripe's webhooks for refunds, handed to their runs as Signals, when this worker has the endpoint's secret.
  const { secret, port, host } = config.webhooks;
  const receiver = secret
    ? await startWebhookReceiver(
        { stripe: deps.stripe, secret, store: deps.store, temporal, taskQueue: config.taskQueue },
        { port, host },
      ).catch((err: unknown) => {
        // Another worker on this host holds the port: this one works without a receiver, and says so.
        logger.error(`webhook receiver not started on ${host}:${port}; this worker runs without it`, {
          error: (err as Error).message,
        });
        return undefined;
      })
    : undefined;
  if (receiver) logger.info(`webhook receiver on ${receiver.url}`);
  try {
    const { versioning } = config.worker;
    // Versioned, the build id is the workflow code's hash: bundled here, once, when no bundle was built ahead.
    const code =
      versioning && !versioning.buildId && !config.workflowBundle ? await bundleRefundWorkflows() : undefined;
    const deployment =
      versioning && deploymentVersion(versioning, () => code ?? fs.readFileSync(config.workflowBundle!, 'utf8'));
    const worker = await createRefundWorker({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.taskQueue,
      activities: deps.activities,
      tracing,
      dataConverter: workerDataConverter(config, keyring),
      // A bundle built ahead of time (`npm run build`) starts the worker in a second instead of bundling here.
      ...(config.workflowBundle && { workflowBundle: { codePath: config.workflowBundle } }),
      ...(code && { workflowBundle: { code } }),
      deployment,
      pools: config.worker.pools,
      slots: config.worker.slots,
      shutdownGraceMs: drain.graceMs,
      stickyTimeoutMs: config.worker.stickyTimeoutMs,
    });
    workers = worker.workers;
    const running = worker.run();
    drain.stopWith(() => worker.shutdown());
    logger.info(
      `worker polling task queue ${worker.queues.join(', ')} on ${config.temporal.address}`,
      startLineFields(config, deps.settings, keyring, deployment, drain.graceMs),
    );
    const { keys } = deps.settings.policy.decisions;
    if (!config.unsignedDecisions && !Object.keys(keys).length)
      logger.warn('no decider has a public key: parked runs take no decision but reconcile until DECIDERS lists keys');
    await drain.phase('pools stopped, tasks in flight finished', () =>
      running.catch((err: unknown) => {
        if (!drain.draining) throw err;
        // The SDK gave up waiting (shutdownForceTime) on a task that did not finish.
        throw new Error(
          `the drain did not finish: tasks still ran ${FORCE_AFTER_GRACE_MS} ms past the grace time (${drain.graceMs} ms, SHUTDOWN_GRACE_MS); ` +
            `they are left to their timeouts, and their runs retry them (a refund request whose answer was lost is reconciled) (${(err as Error).message})`,
          { cause: err },
        );
      }),
    );
  } finally {
    // Each closes before what it uses: the receiver's requests write to the store and signal through Temporal.
    await drain.phase('webhook receiver closed after its requests in flight', () => receiver?.close());
    await drain.phase('tracing flushed', () => tracing.shutdown());
    await drain.phase('Temporal connections closed', () => Promise.all([connection.close(), visibility.close()]));
    await drain.phase('store closed', () => deps.close());
    await health?.close();
    await probe?.close();
  }
}

if (require.main === module) {
  runWorker().then(
    // Everything is closed: nothing left (a stray timer) may keep a stopped worker's process alive.
    () => process.exit(0),
    (err) => {
      console.error(`worker: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}
