// Starting a refund from outside Temporal: validate first, then start the workflow under its
// business key, or attach to the run that already holds that key.
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { AdmissionRejectedError, checkAdmission } from './admission';
import {
  parseRefundWorkflowId,
  REFUND_WORKFLOW,
  refundWorkflowId,
  runDetails,
  runSummary,
  SEARCH_ATTRIBUTES,
  TASK_QUEUE,
  type RefundWorkflow,
} from '../contract';
import { changedIntent, parseRefundRequest } from '../domain/refund-request';
import { ConflictingRefundError, startedWith } from '../temporal/client';

/**
 * Starts the refund, or returns the run that already holds its workflow id (running or
 * finished), so a repeated request never refunds twice. A request that differs from that
 * run's is a changed intent and is refused: it needs a new operation version. With `maxBacklog` (0: none),
 * a new run is refused (AdmissionRejectedError) while the workers are too far behind.
 */
export async function startRefund(client: Client, input: unknown, taskQueue = TASK_QUEUE, maxBacklog = 0) {
  const request = parseRefundRequest(input);
  const workflowId = refundWorkflowId(request.orderId, request.operationVersion);
  // Over the backlog limit, only a new run is refused: a repeated request still finds its run.
  if (maxBacklog > 0 && !(await runExists(client, workflowId))) {
    await checkAdmission(client, taskQueue, maxBacklog, `refund ${workflowId}`).catch(async (err: unknown) => {
      // Started meanwhile by another caller (or the batch): this request attaches to it instead.
      if (!(err instanceof AdmissionRejectedError && (await runExists(client, workflowId)))) throw err;
    });
  }
  try {
    // FAIL, not USE_EXISTING: a start that returns created this run from this request, so only a
    // run that was already there (running or closed) is read back to compare its request.
    const handle = await client.workflow.start<RefundWorkflow>(REFUND_WORKFLOW, {
      taskQueue,
      workflowId,
      args: [request],
      workflowIdConflictPolicy: 'FAIL',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      // Findable by order, and running, from the start: the run's first workflow task need not say so (refund/visibility.ts).
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.orderId, value: request.orderId },
        { key: SEARCH_ATTRIBUTES.status, value: 'running' },
      ],
      // What the run's page in the Web UI says before the run says more (its current details).
      staticSummary: runSummary(request),
      staticDetails: runDetails(request, workflowId),
    });
    return { workflowId, handle, request };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  const existing = await startedWith(client, workflowId);
  const was = changedIntent(existing, request);
  if (was) {
    const next = nextOperationVersion(await orderRuns(client, request.orderId), request.operationVersion);
    throw new ConflictingRefundError(
      `${workflowId} already exists with ${was}; a changed refund for order ${request.orderId} needs a new operation version: the next free one is ${next} (--operation-version ${next}); \`npm run operations -- ${request.orderId}\` lists them`,
    );
  }
  return { workflowId, handle: client.workflow.getHandle<RefundWorkflow>(workflowId), request };
}

async function runExists(client: Client, workflowId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowId).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** Every run for an order that visibility knows, oldest first: rejected and invalid runs hold their versions too. */
export async function orderRuns(client: Client, orderId: string) {
  const runs = [];
  // Order ids are letters, digits, "_" and "-" (the request schema says so): safe in the query.
  for await (const w of client.workflow.list({ query: `RefundOrderId = '${orderId}'` })) {
    const parsed = parseRefundWorkflowId(w.workflowId);
    runs.push({
      workflowId: w.workflowId,
      // Undefined for a run started under an id other than `refund-<order>-v<n>`.
      operationVersion: parsed?.orderId === orderId ? parsed.operationVersion : undefined,
      execution: w.status.name,
      refundStatus: w.typedSearchAttributes.get(SEARCH_ATTRIBUTES.status),
      startTime: w.startTime,
    });
  }
  return runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
}

/** The version after every one the runs (and `atLeast`) hold: a changed intent's. */
export const nextOperationVersion = (runs: { operationVersion?: number }[], atLeast = 0) =>
  runs.reduce((max, r) => Math.max(max, r.operationVersion ?? 0), atLeast) + 1;
