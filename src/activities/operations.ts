// The start and end of an operation in the store: the intent is committed (identity, request hash)
// before anything is sent, and a run that stops leaves its verdict in the audit trail.
import { Context } from '@temporalio/activity';
import { createHash } from 'node:crypto';
import { maskEmails } from '../reliability/evidence';
import { operationId as deriveOperationId } from '../reliability/identity';
import type { BeginResult, Blocker, Evidenced, RunSettings } from '../receipts';
import type { Order, RefundRequest } from '../shared';
import type { OperationRecord, OrderStore } from '../store/types';
import { Classified, type AttemptRunner } from './attempt';
import { storeFailure } from './store-failures';

export interface BeginOperationInput {
  request: RefundRequest;
}

export interface RecordOutcomeInput {
  operationId: string;
  /** The run's terminal status and why. */
  status: string;
  reason: string;
  failedStep: string | null;
}

/** sha256 of the canonical request: what the operation asks for, keys sorted, nothing about who or when. */
export function requestHash(request: Pick<RefundRequest, 'orderId' | 'amount' | 'currency' | 'reason'>): string {
  const canonical = JSON.stringify({ amount: request.amount, currency: request.currency, orderId: request.orderId, reason: request.reason });
  return createHash('sha256').update(canonical).digest('hex');
}

/** Effects an operation's record proves already happened: its refund exists at the provider. */
const HAS_REFUND: OperationRecord['status'][] = ['refunded', 'partial', 'completed', 'failed'];

export function createOperationActivities(deps: { store: OrderStore; attempt: AttemptRunner; settings: RunSettings }) {
  const { store, attempt, settings } = deps;
  const actor = () => Context.current().info.workflowExecution?.workflowId ?? 'activity';

  async function beginOperation(input: BeginOperationInput): Promise<Evidenced<BeginResult>> {
    const { request } = input;
    const operationId = deriveOperationId(settings.scope, request.orderId, request.operationVersion);
    const call = { step: 'load_order', key: `${operationId}:load_order`, operationId, boundary: 'store' as const };
    return attempt(call, storeFailure, async () => {
      const order = await store.getOrder(request.orderId);
      if (!order) throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'order_not_found', `order ${request.orderId} does not exist`);
      const intent = {
        operationId,
        orderId: request.orderId,
        operationVersion: request.operationVersion,
        scope: settings.scope,
        requestHash: requestHash(request),
        request: { orderId: request.orderId, amount: request.amount, currency: request.currency, reason: request.reason },
        actor: actor(),
      };
      const { record, created } = await store.operations.commitIntent(intent);
      const applied = await store.appliedRefund(operationId);
      // This operation's own refund is already on the order (or at the provider): checking it against what is left would refuse a repeat of itself.
      let problem = applied || HAS_REFUND.includes(record.status) ? null : refundProblem(order, request);
      if (record.status === 'superseded') problem = `operation ${operationId} was ${record.reason ?? 'superseded'} and is never sent again`;
      let operation = record;
      if (problem && record.lastSentAt === null && record.status === 'intent') {
        ({ record: operation } = await store.operations.settle(operationId, { status: 'rejected', reason: problem }, actor(), 'rejected'));
      }
      const blockers: Blocker[] = [];
      for (const op of await store.operations.forOrder(request.orderId)) {
        if (op.operationId === operationId) continue;
        const settle = await howToSettle(op, request.operationVersion);
        if (settle) blockers.push({ operation: op, settle });
      }
      return { order: { ...order, customerEmail: maskEmails(order.customerEmail) }, operation, created, problem, blockers, settings };
    });
  }

  /**
   * What another operation on the order needs before this one may send, or undefined when it is
   * settled (completed, failed, superseded, refused, or refunded and on the order). An unsettled
   * later version holds an earlier one back; an earlier one never sent, or proven absent since its
   * last send, is fenced off; any other is asked about at the provider first.
   */
  async function howToSettle(op: OperationRecord, version: number): Promise<Blocker['settle'] | undefined> {
    if (['completed', 'failed', 'superseded', 'rejected'].includes(op.status)) return undefined;
    if ((op.status === 'refunded' || op.status === 'partial') && (await store.appliedRefund(op.operationId))) return undefined;
    if (op.operationVersion > version) return 'later';
    if (op.status === 'intent' && op.requestsSent === (op.provenAbsentThrough ?? 0)) return 'fence';
    return 'reconcile';
  }

  /**
   * Fences off an earlier operation that reconciliation proved never took effect, so that it is
   * never sent after this one went ahead; refused (applied: false) if it was sent again since.
   */
  async function supersedeOperation(input: { operationId: string; by: string; ifRequestsSent: number }): Promise<Evidenced<{ applied: boolean; status: string }>> {
    const call = { step: 'supersede', key: `${input.operationId}:supersede`, operationId: input.operationId, boundary: 'store' as const };
    return attempt(call, storeFailure, async () => {
      const { record, applied } = await store.operations.settle(
        input.operationId,
        { status: 'superseded', reason: `superseded by ${input.by}`, ifRequestsSent: input.ifRequestsSent },
        actor(),
        'superseded',
        { by: input.by },
      );
      return { applied, status: record.status };
    });
  }

  /** The run's own state is the record; this leaves its verdict beside the operation's evidence. */
  async function recordOutcome(input: RecordOutcomeInput): Promise<Evidenced<{ recorded: true }>> {
    const call = { step: 'run_stopped', key: `${input.operationId}:run_stopped`, operationId: input.operationId, boundary: 'store' as const };
    return attempt(call, storeFailure, async () => {
      await store.operations.audit(input.operationId, actor(), 'run_stopped', { status: input.status, reason: input.reason, failedStep: input.failedStep });
      return { recorded: true as const };
    });
  }

  return { beginOperation, supersedeOperation, recordOutcome };
}

/** Why this order cannot take this refund, or null when it can. */
export function refundProblem(order: Order, request: Pick<RefundRequest, 'amount' | 'currency'>): string | null {
  if (order.currency !== request.currency) {
    return `order ${order.id} was paid in ${order.currency}, the refund asks for ${request.currency}`;
  }
  const refundable = order.amount - order.refundedAmount;
  if (request.amount > refundable) {
    return `refund of ${request.amount} exceeds the ${refundable} still refundable on order ${order.id}`;
  }
  return null;
}
