// The Temporal workers of one process, one per pool (workflows, effects, reconcile), built and run together.
import { bundleWorkflowCode, DefaultLogger, Worker, type WorkerOptions } from '@temporalio/worker';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { RefundActivities } from './activities';
import { DEFAULT_SLOTS } from './config/env';
import { FORCE_AFTER_GRACE_MS } from './lifecycle/drain';
import { deploymentOptions } from './lifecycle/deployment';
import { startTracing, type WorkerTracing } from './observability/tracing';
import {
  ACTIVITY_POOLS,
  TASK_QUEUE,
  WORKER_POOLS,
  poolQueue,
  type FollowUpWorkflow,
  type RefundWorkflow,
  type WorkerPool,
} from './contract';
import type { followUpWorkflow, refundWorkflow } from './workflows';
import { FAILURE_CONVERTER_PATH, PAYLOAD_CONVERTER_PATH, refundDataConverter } from './codec/data-converter';

/** Long polls per pool, not the SDK's 10: a dead process's polls still get tasks, which then wait out their timeout. */
const POLLERS = 5;

type RefundWorkerOptions = Pick<WorkerOptions, 'connection' | 'namespace'> &
  Partial<Pick<WorkerOptions, 'taskQueue' | 'workflowBundle' | 'identity' | 'dataConverter'>> & {
    activities: RefundActivities;
    tracing?: WorkerTracing;
    /** The pools this process serves; all of them unless given. */
    pools?: readonly WorkerPool[];
    slots?: Partial<Record<WorkerPool, number>>;
    /** How long a shutdown lets tasks in flight finish (then cancels them, and stops waiting a second later); the SDK's 0 unless given. */
    shutdownGraceMs?: number;
    /** How long a run's workflow task waits for this process, which has the run cached, before another takes it. */
    stickyTimeoutMs?: number;
    /** The Worker Deployment Version every pool polls as; unversioned unless given. */
    deployment?: WorkerDeploymentVersion;
  };

/** The Temporal workers of one process, one per pool, run and stopped together. */
export class RefundWorker {
  constructor(readonly workers: Worker[]) {}

  /** Runs every pool, one failing stopping all; settles once all have stopped, with the first failure if any. */
  async run(): Promise<void> {
    const results = await Promise.allSettled(
      this.workers.map((w) =>
        w.run().catch((err: unknown) => {
          this.shutdown();
          throw err;
        }),
      ),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  shutdown(): void {
    for (const w of this.workers) if (w.getState() === 'RUNNING') w.shutdown();
  }

  /** The task queues the pools poll. */
  get queues(): string[] {
    return this.workers.map((w) => w.options.taskQueue);
  }
}

/** Clients start and type runs by the contract's workflow types: tsc fails here if a workflow's own type drifts from them. */
type Is<Actual extends Expected, Expected> = [Actual, Expected];
export type RegisteredWorkflows = [
  Is<typeof refundWorkflow, RefundWorkflow>,
  Is<typeof followUpWorkflow, FollowUpWorkflow>,
];

/** The workflow code as a worker runs it; `npm run bundle` writes the same ahead of time. */
export async function bundleRefundWorkflows(): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./workflows'),
    preloadModules: [require.resolve('./workflows/preload')],
    failureConverterPath: FAILURE_CONVERTER_PATH,
    payloadConverterPath: PAYLOAD_CONVERTER_PATH,
    logger: new DefaultLogger('WARN'),
    // Its source map only names file and line in a workflow's stack traces (the SDK maps one for every promise a run
    // creates): lines alone, without the sources, are a fifth of the map, cheaper to hold and to look up.
    webpackConfigHook: (config) => ({ ...config, devtool: 'inline-nosources-cheap-module-source-map' }),
  });
  return code;
}

/** The one way a refund worker is built; its data converter must be its clients' (plaintext unless given). */
export async function createRefundWorker(options: RefundWorkerOptions): Promise<RefundWorker> {
  const {
    workflowBundle,
    tracing = startTracing('none', ''),
    dataConverter = refundDataConverter(undefined),
    taskQueue = TASK_QUEUE,
    pools = WORKER_POOLS,
    slots,
    shutdownGraceMs,
    stickyTimeoutMs,
    deployment,
    ...rest
  } = options;
  const n = { ...DEFAULT_SLOTS, ...slots };
  const common = {
    ...rest,
    dataConverter,
    interceptors: { activity: tracing.activityInterceptors },
    workerDeploymentOptions: deploymentOptions(deployment),
    ...(shutdownGraceMs !== undefined && {
      shutdownGraceTime: shutdownGraceMs,
      shutdownForceTime: shutdownGraceMs + FORCE_AFTER_GRACE_MS,
    }),
  };
  const specs: WorkerOptions[] = [];
  if (pools.includes('workflows')) {
    specs.push({
      ...common,
      taskQueue,
      workflowBundle: workflowBundle ?? { code: await bundleRefundWorkflows() },
      ...(stickyTimeoutMs !== undefined && { stickyQueueScheduleToStartTimeout: stickyTimeoutMs }),
      maxConcurrentWorkflowTaskExecutions: n.workflows,
      workflowTaskPollerBehavior: { type: 'simple-maximum', maximum: POLLERS },
      // No activity is scheduled on this queue (each has its pool); the store steps run here as local activities.
      maxConcurrentActivityTaskExecutions: n.effects,
      activityTaskPollerBehavior: { type: 'simple-maximum', maximum: 2 },
    });
  }
  for (const pool of ACTIVITY_POOLS.filter((p) => pools.includes(p))) {
    specs.push({
      ...common,
      taskQueue: poolQueue(taskQueue, pool),
      maxConcurrentActivityTaskExecutions: n[pool],
      activityTaskPollerBehavior: { type: 'simple-maximum', maximum: POLLERS },
    });
  }
  if (specs.length === 0) throw new Error('a worker needs at least one pool (WORKER_POOLS)');
  const workers: Worker[] = [];
  try {
    for (const spec of specs) workers.push(await Worker.create(spec));
  } catch (err) {
    // Workers already created hold the connection until they have run: run them down.
    await Promise.all(workers.map((w) => w.runUntil(Promise.resolve()).catch(() => undefined)));
    throw err;
  }
  return new RefundWorker(workers);
}
