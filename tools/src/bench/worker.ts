// A worker for the benchmark's bare, bare+platform and naive workflows, as its own process (so that its CPU and
// memory are its own, and it can be SIGKILLed): `BENCH_TASK_QUEUE`, the refund workers' Temporal, Stripe, SMTP
// and database settings, `BENCH_WORKFLOW_BUNDLE` and `METRICS_PROMETHEUS_ADDRESS`. `BENCH_PLATFORM=on`: the
// refund worker's log and payload encryption (`PAYLOAD_KEYS`, `PAYLOAD_COMPRESSION`) too.
import { NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { refundDataConverter } from '../../../src/codec/data-converter';
import { parseKeyring } from '../../../src/codec/keyring';
import { createLogger } from '../../../src/observability/logging';
import { storeMetrics } from '../../../src/observability/metrics';
import { createMailTransport } from '../../../src/activities/mail-transport';
import { createStripeClient } from '../../../src/activities/stripe-client';
import { openStore } from '../../../src/store';
import { createBareActivities } from './activities';

async function main(): Promise<void> {
  const env = (name: string): string =>
    process.env[name] ??
    ((): never => {
      throw new Error(`${name} is not set`);
    })();
  const taskQueue = env('BENCH_TASK_QUEUE');
  // Metrics exported as the refund worker exports them (METRICS_PROMETHEUS_ADDRESS), the store's counters among them.
  const bindAddress = process.env.METRICS_PROMETHEUS_ADDRESS;
  const platform = process.env.BENCH_PLATFORM === 'on';
  Runtime.install({
    ...(platform && { logger: createLogger('info') }),
    ...(bindAddress && { telemetryOptions: { metrics: { prometheus: { bindAddress } } } }),
  });
  const observer = bindAddress ? storeMetrics(Runtime.instance().metricMeter) : undefined;
  const store = await openStore(env('DATABASE_URL'), { observer });
  const mail = createMailTransport(env('SMTP_URL'));
  const stripe = createStripeClient({
    secretKey: env('STRIPE_SECRET_KEY'),
    apiBase: env('STRIPE_API_BASE'),
    requestTimeoutMs: Number(env('STRIPE_TIMEOUT_MS')),
  });
  const connection = await NativeConnection.connect({ address: env('TEMPORAL_ADDRESS') });
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle: { codePath: env('BENCH_WORKFLOW_BUNDLE') },
    ...(platform && {
      dataConverter: refundDataConverter(parseKeyring(env('PAYLOAD_KEYS'), 'PAYLOAD_KEYS'), {
        compress: process.env.PAYLOAD_COMPRESSION !== 'off',
      }),
    }),
    activities: createBareActivities({ stripe, store, mail, from: 'refunds@example.test', logged: platform }),
    // As many slots as the refund worker has: the same room to run in.
    maxConcurrentWorkflowTaskExecutions: 40,
    maxConcurrentActivityTaskExecutions: 20,
  });
  console.log(`worker polling task queue ${taskQueue}`);
  try {
    await worker.run();
  } finally {
    await connection.close();
    await store.close();
    mail.close();
  }
}

main().catch((err: unknown) => {
  console.error(`bench worker: ${(err as Error).message}`);
  process.exit(1);
});
