// What the product asks of Temporal from outside a workflow, for the clients, the CLIs, inspect, the webhook
// receiver and the activities alike. It loads no workflow code (workflows are named by type, typed by `typeof`).
import { Connection, type Client } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import {
  FOLLOW_UP_WORKFLOW,
  followUpWorkflowId,
  poolQueue,
  providerEventSignal,
  SEARCH_ATTRIBUTES,
  TASK_QUEUE,
  type FollowUpWorkflow,
  type ProviderEventSummary,
} from '../contract';
import type { Config } from '../config';
import { parseRefundRequest, type RefundRequest } from '../domain/refund-request';

const { TASK_QUEUE_TYPE_WORKFLOW, TASK_QUEUE_TYPE_ACTIVITY } = temporal.api.enums.v1.TaskQueueType;

/** A refund that asks for what an existing run under its business key does not do. */
export class ConflictingRefundError extends Error {
  override name = 'ConflictingRefundError';
}

/** The request a refund run was started with, from the first event of its history: needs no worker, unlike a Query. */
export async function startedWith(client: Client, workflowId: string): Promise<RefundRequest> {
  const { history } = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId },
    maximumPageSize: 1,
  });
  const payloads = history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads;
  const [input] = await decodeArrayFromPayloads(client.options.loadedDataConverter, payloads);
  try {
    return parseRefundRequest(input);
  } catch {
    throw new ConflictingRefundError(`${workflowId} already exists and was started with an invalid request`);
  }
}

/** The backlogs new refunds add to: workflow tasks on the task queue, activities in the effects pool. */
export async function backlogs(client: Client, taskQueue: string) {
  const queues = [
    { name: taskQueue, type: TASK_QUEUE_TYPE_WORKFLOW },
    { name: poolQueue(taskQueue, 'effects'), type: TASK_QUEUE_TYPE_ACTIVITY },
  ];
  return Promise.all(
    queues.map(async ({ name, type }) => {
      const { stats } = await client.workflowService.describeTaskQueue({
        namespace: client.options.namespace,
        taskQueue: { name },
        taskQueueType: type,
        reportStats: true,
      });
      // No figure is not "no backlog": admission would admit everything without a word.
      if (!stats)
        throw new Error(
          `Temporal reported no backlog for task queue ${name} (a server too old for DescribeTaskQueue stats?); ADMISSION_MAX_BACKLOG=0 starts refunds without admission control`,
        );
      return {
        taskQueue: name,
        // Tasks waiting for a worker, as the server estimates them (its figure lags by a few seconds).
        tasks: Number(stats?.approximateBacklogCount ?? 0),
        ageSeconds: Number(stats?.approximateBacklogAge?.seconds ?? 0),
      };
    }),
  );
}

export type Backlog = Awaited<ReturnType<typeof backlogs>>[number];

/**
 * Whether a worker polled the workflow task queue lately (Temporal keeps pollers seen in the last
 * minutes); with `pid`, only a worker of that process (the SDK's identity is `<pid>@<host>`).
 */
export async function workerPolling(client: Client, taskQueue = TASK_QUEUE, pid?: number): Promise<boolean> {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (pollers ?? []).some((p) => pid === undefined || p.identity?.startsWith(`${pid}@`));
}

/** How the `temporal` CLI names a search attribute's type. */
export const cliType = (type: SearchAttributeType) => (type === SearchAttributeType.BOOL ? 'Bool' : 'Keyword');
const indexedType = (type: SearchAttributeType) =>
  type === SearchAttributeType.BOOL
    ? temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_BOOL
    : temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;

/** A connection to the configured Temporal; `hint`: what to do when it does not answer. */
export async function connectTemporal(config: Config, hint: string, connectTimeout = '10s'): Promise<Connection> {
  try {
    return await Connection.connect({ ...config.temporal.connection, connectTimeout });
  } catch (err) {
    throw new Error(`cannot reach Temporal at ${config.temporal.address} (${(err as Error).message}); ${hint}`, {
      cause: err,
    });
  }
}

/** Our search attributes the namespace does not have. */
async function missingSearchAttributes(connection: Connection, namespace: string) {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  return Object.values(SEARCH_ATTRIBUTES).filter((key) => !(key.name in (customAttributes ?? {})));
}

/** Registers the search attributes the namespace lacks, and waits until the server lists them; the names it added. */
export async function registerSearchAttributes(
  connection: Connection,
  namespace: string,
  log: (line: string) => void = () => undefined,
): Promise<string[]> {
  const missing = await missingSearchAttributes(connection, namespace);
  if (missing.length === 0) return [];
  log(`registering search attributes ${missing.map((k) => k.name).join(', ')}`);
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((k) => [k.name, indexedType(k.type)])),
  });
  const deadline = Date.now() + 30_000;
  while ((await missingSearchAttributes(connection, namespace)).length > 0) {
    if (Date.now() >= deadline) throw new Error('the search attributes did not become ready within 30s');
    await new Promise((r) => setTimeout(r, 250));
  }
  return missing.map((k) => k.name);
}

/**
 * Workflow tasks that upsert a search attribute the namespace lacks fail, over and over: a worker
 * says so at start-up instead, and names the fix.
 */
export async function requireSearchAttributes(config: Config): Promise<void> {
  const connection = await connectTemporal(
    config,
    'start the stack with `npm run dev`, or set TEMPORAL_ADDRESS or TEMPORAL_PROFILE',
  );
  try {
    const missing = await missingSearchAttributes(connection, config.temporal.namespace);
    if (missing.length > 0)
      throw new Error(
        `namespace ${config.temporal.namespace} on ${config.temporal.address} lacks the search attributes ${missing.map((k) => k.name).join(', ')}; ` +
          `\`npm run setup-cluster\` registers them (\`npm run dev\` does on a local server), or: ${missing.map((k) => `temporal operator search-attribute create --name ${k.name} --type ${cliType(k.type)}`).join('; ')}`,
      );
  } finally {
    await connection.close();
  }
}

/** Starts (or signals) an operation's follow-up run: a refund that failed after the run that made it finished. */
export async function startFollowUp(
  client: Client,
  handover: { operationId: string; originalWorkflowId: string; event: ProviderEventSummary; taskQueue?: string },
): Promise<{ workflowId: string; runId: string }> {
  const { operationId, originalWorkflowId, event } = handover;
  const workflowId = followUpWorkflowId(operationId);
  const handle = await client.workflow.signalWithStart<FollowUpWorkflow, [ProviderEventSummary]>(FOLLOW_UP_WORKFLOW, {
    workflowId,
    taskQueue: handover.taskQueue ?? TASK_QUEUE,
    args: [{ operationId, refundId: event.refundId, originalWorkflowId }],
    signal: providerEventSignal,
    signalArgs: [event],
    typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.followUpOf, value: originalWorkflowId }],
  });
  return { workflowId, runId: handle.signaledRunId };
}
