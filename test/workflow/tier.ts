// The workflow tier's setup, as the Temporal samples test workflows: the real workflow code (the
// suite's bundle) on the shared dev server, with activities stubbed in memory. One worker per file;
// each run gets its own world of fakes, found by its workflow id, so that cases never share state.
import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type { RefundActivities } from '../../src/activities';
import { refundDataConverter } from '../../src/codec/data-converter';
import type { RefundRunState } from '../../src/contract';
import type { RefundRequestInput } from '../../src/domain/refund-request';
import type { InspectedRun } from '../../src/reliability/verdict';
import { bundleRefundWorkflows, createRefundWorker, type RefundWorker } from '../../src/worker-pools';
import type { refundWorkflow } from '../../src/workflows';
import { recordHistory, testEnvironment } from '../helpers/temporal';
import { fakeActivities, newWorld, type World } from './fake-activities';

type Overrides = Parameters<typeof fakeActivities>[1];

export interface Started {
  world: World;
  handle: WorkflowHandle<typeof refundWorkflow>;
}

export interface WorkflowTier {
  env: TestWorkflowEnvironment;
  /** Starts a refund run of `amount` (1250 unless given) on a new order, its activities faked over a world of its own. */
  start(opts?: { amount?: number; over?: Overrides; world?: (w: World) => void; input?: unknown }): Promise<Started>;
  /** With RECORD_HISTORY set, writes the run's history to test/histories/<name>.json for the replay suite (payloads here are plaintext). */
  recordHistory(workflowId: string, name: string): Promise<void>;
  close(): Promise<void>;
}

export const request = (orderId: string, amount = 1250): RefundRequestInput => ({
  orderId,
  amount,
  currency: 'usd',
  requestedBy: 'test',
});

/** A parked run as `inspect` reads it: Running, its state by the steps Query, no evidence contradicting it. */
export const asInspected = (state: RefundRunState): InspectedRun => ({
  execution: 'RUNNING',
  state,
  result: null,
  failure: null,
  inferences: [],
  parkedVerdict: null,
  orderId: state.request.orderId,
  version: 1,
});

export async function startWorkflowTier(): Promise<WorkflowTier> {
  const dataConverter = refundDataConverter(undefined);
  const env = await testEnvironment({ dataConverter });
  const taskQueue = `refunds-${randomUUID()}`;
  const runs = new Map<string, RefundActivities>();
  // Each call goes to the fakes of the run that scheduled it.
  const names = Object.keys(fakeActivities(newWorld('x')));
  const dispatch = Object.fromEntries(
    names.map((name) => [
      name,
      (input: unknown) => {
        const workflowId = Context.current().info.workflowExecution?.workflowId ?? '';
        const acts = runs.get(workflowId) as unknown as Record<string, (i: unknown) => Promise<unknown>> | undefined;
        if (!acts) throw new Error(`no fakes for ${workflowId}`);
        return acts[name]!(input);
      },
    ]),
  ) as unknown as RefundActivities;
  const bundled = process.env.TEST_WORKFLOW_BUNDLE;
  const workflowBundle = { code: bundled ? fs.readFileSync(bundled, 'utf8') : await bundleRefundWorkflows() };
  const worker: RefundWorker = await createRefundWorker({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle,
    dataConverter,
    activities: dispatch,
  });
  const running = worker.run();
  return {
    env,
    async start(opts = {}) {
      const orderId = `ord_${randomUUID().slice(0, 8)}`;
      const world = newWorld(orderId);
      opts.world?.(world);
      const workflowId = `refund-${orderId}-v1`;
      runs.set(workflowId, fakeActivities(world, opts.over));
      const handle = await env.client.workflow.start<typeof refundWorkflow>('refundWorkflow', {
        taskQueue,
        workflowId,
        args: [(opts.input ?? request(orderId, opts.amount)) as RefundRequestInput],
      });
      return { world, handle };
    },
    recordHistory: (workflowId, name) => recordHistory(env, workflowId, name),
    async close() {
      worker.shutdown();
      await running;
      await env.teardown();
    },
  };
}
