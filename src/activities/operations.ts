// The start and end of an operation in the store: its intent committed before anything is sent, and its verdict.
import { createHash } from 'node:crypto';
import { maskEmails } from '../reliability/redaction';
import {
  operationId as deriveOperationId,
  stepKey,
  type BeginResult,
  type Evidenced,
  pinSettings,
  type RunSettings,
} from '../contract';
import type { Order } from '../domain/order';
import type { RefundRequest } from '../domain/refund-request';
import type { NewOperation, OperationRecord, OrderStore } from '../store';
import { Classified, recordingEffect, stepCall, type AttemptRunner } from './attempt';
import { storeFailure } from './store-failures';

export interface RecordOutcomeInput {
  operationId: string;
  /** The run's status (terminal, or parked) and why. */
  status: string;
  reason: string;
  failedStep: string | null;
  /** The audit event: run_stopped (the default), run_parked, decision, or follow_up (a late failure's follow-up run). */
  event?: 'run_stopped' | 'run_parked' | 'decision' | 'follow_up';
  detail?: Record<string, unknown>;
}

/** sha256 of the canonical request: what the operation asks for, keys sorted, nothing about who or when. */
export function requestHash(request: Pick<RefundRequest, 'orderId' | 'amount' | 'currency' | 'reason'>): string {
  const { amount, currency, orderId, reason } = request;
  const canonical = JSON.stringify({ amount, currency, orderId, reason });
  return createHash('sha256').update(canonical).digest('hex');
}

/** A refund operation's intent as the store commits it: its id from scope, order and version; its request hashed. */
export function refundIntent(scope: string, request: Omit<RefundRequest, 'requestedBy'>): Omit<NewOperation, 'actor'> {
  const { orderId, amount, currency, reason, operationVersion } = request;
  const refund = { orderId, amount, currency, reason };
  const operationId = deriveOperationId(scope, orderId, operationVersion);
  return { operationId, orderId, operationVersion, scope, requestHash: requestHash(refund), request: refund };
}

/** Effects an operation's record proves already happened: its refund exists at the provider. */
const HAS_REFUND: OperationRecord['status'][] = ['refunded', 'partial', 'completed', 'failed'];

export function createOperationActivities(deps: { store: OrderStore; attempt: AttemptRunner; settings: RunSettings }) {
  const { store, attempt, settings } = deps;
  // As the run's history pins them: the policy as its changes from the shipped one (none, on the default).
  const pinned = pinSettings(settings);

  async function beginOperation({ request }: { request: RefundRequest }): Promise<Evidenced<BeginResult>> {
    const intent = refundIntent(settings.scope, request);
    const { operationId } = intent;
    const call = stepCall('load_order', { key: stepKey(operationId, 'load_order'), operationId }, 'store');
    return attempt(call, storeFailure, async (a) => {
      const order = await store.getOrder(request.orderId);
      if (!order) {
        const message = `order ${request.orderId} does not exist`;
        throw new Classified('PERMANENT_BUSINESS', 'not_executed', 'order_not_found', message);
      }
      const { record, created } = await recordingEffect(a, () =>
        store.operations.commitIntent({ ...intent, actor: a.actor }),
      );
      // Read after the intent's commit: an operation whose send was stamped before it is seen (a later stamp is refused).
      const onOrder = await store.operations.forOrder(request.orderId);
      const applied = onOrder.some((o) => o.operation.operationId === operationId && o.refundOnOrder);
      const others = onOrder.filter((o) => o.operation.operationId !== operationId);
      const later = others
        .map((o) => o.operation)
        .find((op) => op.scope === settings.scope && op.operationVersion > request.operationVersion);
      const hasRefund = applied || HAS_REFUND.includes(record.status);
      // This operation's own refund is already on the order (or at the provider): checking it against what is left would refuse a repeat of itself.
      let problem = hasRefund ? null : refundProblem(order, request);
      if (!hasRefund && later && !unproven(record))
        problem = `order ${request.orderId} has a later operation, ${later.operationId}: this earlier one is not sent after it`;
      let operation = record;
      if (problem && record.status === 'intent' && !unproven(record)) {
        const refused = { status: 'rejected' as const, reason: problem, ifRequestsSent: record.requestsSent };
        ({ record: operation } = await store.operations.settle(operationId, refused, a.actor, 'rejected'));
      }
      const blockers = others
        .filter((o) => o.operation.operationVersion < request.operationVersion && unsettled(o))
        .map((o) => o.operation);
      // The order as history may carry it: its customer's address masked.
      const masked = { ...order, customerEmail: maskEmails(order.customerEmail) };
      return { order: masked, operation, created, problem, blockers, settings: pinned };
    });
  }

  /** The run's own state is the record; this leaves its verdict beside the operation's evidence. */
  async function recordOutcome(input: RecordOutcomeInput): Promise<Evidenced<{ recorded: true }>> {
    const call = stepCall('run_stopped', { ...input, key: stepKey(input.operationId, 'run_stopped') }, 'store');
    return attempt(call, storeFailure, async (a) => {
      const detail = { status: input.status, reason: input.reason, failedStep: input.failedStep, ...input.detail };
      await store.operations.audit(input.operationId, a.actor, input.event ?? 'run_stopped', detail);
      return { recorded: true as const };
    });
  }

  return { beginOperation, recordOutcome };
}

/** An earlier operation whose effect the order may not show: a send unproven, or a refund not on the order yet. */
function unsettled({ operation: op, refundOnOrder }: { operation: OperationRecord; refundOnOrder: boolean }): boolean {
  const refunded = op.status === 'refunded' || op.status === 'partial';
  return unproven(op) || (refunded && !refundOnOrder);
}

/** Sent, with no receipt and no proof of absence since its last send: it may have taken effect. */
function unproven(op: OperationRecord): boolean {
  return ['intent', 'unknown', 'rejected'].includes(op.status) && op.requestsSent > (op.provenAbsentThrough ?? 0);
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
