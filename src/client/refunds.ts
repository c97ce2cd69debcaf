// Starting a refund from outside Temporal: validate first, then start the workflow under its
// business key, or attach to the run that already holds that key.
import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { parseRefundRequest, refundWorkflowId, TASK_QUEUE, type RefundRequest } from '../shared';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import { refundWorkflow, type RefundResult } from '../workflows';

export class ConflictingRefundError extends Error {
  override name = 'ConflictingRefundError';
}

export interface StartedRefund {
  workflowId: string;
  handle: WorkflowHandle<typeof refundWorkflow>;
  request: RefundRequest;
}

/**
 * Starts the refund, or returns the run that already holds its workflow id (running or
 * finished), so a repeated request never refunds twice. A request that differs from that
 * run's is a changed intent and is refused: it needs a new operation version.
 */
export async function startRefund(client: Client, input: unknown): Promise<StartedRefund> {
  const request = parseRefundRequest(input);
  const workflowId = refundWorkflowId(request.orderId, request.operationVersion);
  let handle: WorkflowHandle<typeof refundWorkflow>;
  try {
    handle = await client.workflow.start(refundWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId,
      args: [request],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    handle = client.workflow.getHandle<typeof refundWorkflow>(workflowId);
  }
  const existing = await startedWith(client, workflowId);
  const differs = (['amount', 'currency', 'reason'] as const).filter((f) => existing[f] !== request[f]);
  if (differs.length > 0) {
    const was = differs.map((f) => `${f} ${existing[f]}`).join(', ');
    throw new ConflictingRefundError(
      `${workflowId} already exists with ${was}; a changed refund for order ${request.orderId} needs a new operation version (e.g. --operation-version ${request.operationVersion + 1})`,
    );
  }
  return { workflowId, handle, request };
}

/** The request a run was started with, read from its history: needs no worker, unlike a Query. */
async function startedWith(client: Client, workflowId: string): Promise<RefundRequest> {
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

export async function refund(client: Client, input: unknown): Promise<RefundResult> {
  const { handle } = await startRefund(client, input);
  return handle.result();
}
