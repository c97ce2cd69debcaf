import { bundleWorkflowCode, DefaultLogger, NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import type { RefundActivities } from './activities';
import { loadConfig } from './config';
import { openDeps } from './deps';
import { TASK_QUEUE } from './shared';

type RefundWorkerOptions = Pick<WorkerOptions, 'connection' | 'namespace'> &
  Partial<Pick<WorkerOptions, 'taskQueue' | 'workflowBundle' | 'identity'>> & { activities: RefundActivities };

/** The one way a refund worker is built, used by `npm start`, the stack and the tests. */
export async function createRefundWorker(options: RefundWorkerOptions): Promise<Worker> {
  const { workflowBundle, ...rest } = options;
  return Worker.create({
    taskQueue: TASK_QUEUE,
    // Bundled here with a quiet logger: webpack's progress is noise on a terminal.
    workflowBundle: workflowBundle ?? (await bundleWorkflowCode({ workflowsPath: require.resolve('./workflows'), logger: new DefaultLogger('WARN') })),
    ...rest,
  });
}

export async function runWorker(): Promise<void> {
  const config = loadConfig();
  const deps = openDeps(config);
  let connection: NativeConnection;
  try {
    connection = await NativeConnection.connect({ address: config.temporal.address });
  } catch (err) {
    await deps.close();
    throw new Error(
      `cannot reach Temporal at ${config.temporal.address} (${(err as Error).message}); start the stack with \`npm run dev\`, or set TEMPORAL_ADDRESS`,
      { cause: err },
    );
  }
  try {
    const worker = await createRefundWorker({ connection, namespace: config.temporal.namespace, activities: deps.activities });
    console.log(
      `worker polling task queue "${TASK_QUEUE}" on ${config.temporal.address} (namespace ${config.temporal.namespace}), ` +
        `scope "${deps.settings.scope}", recovery policy ${deps.settings.policy.version}${config.faultInjection ? ', store faults on' : ''}`,
    );
    await worker.run();
  } finally {
    await connection.close();
    await deps.close();
  }
}

if (require.main === module) {
  runWorker().catch((err) => {
    console.error(`worker: ${(err as Error).message}`);
    process.exit(1);
  });
}
