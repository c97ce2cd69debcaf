// The createRefund activity: the refund sent through Stripe by the send protocol (src/saga/send.ts), once the
// operation's recorded intent allows it, with what the send proves going to the operation's record.
import { Context } from '@temporalio/activity';
import type Stripe from 'stripe';
import {
  type Carried,
  type Carry,
  type Evidenced,
  orderUpdateOf,
  type ProviderWindows,
  receiptAgainstAsk,
  type RefundReceipt,
} from '../contract';
import type { REFUND_REASONS } from '../domain/refund-request';
import type { OperationLog, OperationRecord, OperationUpdate, OrderStore, Queryable } from '../store';
import { outsideDedupeWindow, sendOnce } from '../saga/send';
import { LaterVersionError } from '../store/errors';
import { activityMetrics, type ActivityMetrics } from './activity-metrics';
import { Classified, stepCall, succeeded, type Attempt } from './attempt';
import { insideDedupeWindow } from './request-deadline';
import { receiptNotRecorded } from './store-failures';
import type { StripeDeps } from './stripe-client';
import { paymentFailure, stripeFailure } from './stripe-failures';
import { refundUpdate, toReceipt } from './stripe-refunds';

/** What the payment activities (the create and its reconciliation) are given. */
export type PaymentDeps = Pick<StripeDeps, 'stripe' | 'attempt'> & {
  log: OperationLog;
  windows: ProviderWindows;
  /** The order update the refund's receipt may carry (`carry: ['update_order']`); without it, nothing is carried. */
  carryRefund?: OrderStore['carryRefund'];
  /** Where reconciliations are counted (default: each activity's own meter). */
  metrics?: ActivityMetrics;
};

export interface CreateRefundInput extends Carry {
  orderId: string;
  operationId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
  reason: (typeof REFUND_REASONS)[number];
  /** Derived deterministically in workflow code, so every attempt of this operation sends the same key. */
  idempotencyKey: string;
}

export function refundCreation(deps: PaymentDeps) {
  const { log } = deps;
  const stripeSend = stripeSendParts(deps.windows, () => log.clock());
  const metrics = deps.metrics ?? activityMetrics();

  /** Sends the refund unless its record says not to; the receipt is Stripe's as it is (less than asked, or failed). */
  async function createRefund(input: CreateRefundInput): Promise<Evidenced<RefundReceipt>> {
    const { operationId, idempotencyKey } = input;
    const call = stepCall('create_refund', { key: idempotencyKey, operationId }, 'stripe', 'stripe:create_refund');
    // Every failure carries the operation's record as it stands after it: what the run says of the refund comes from there.
    return deps.attempt(call, paymentFailure(true), (attempt) =>
      sendRefund(attempt, input).catch((err: unknown) => failWithRecord(operationId, err)),
    );
  }

  async function sendRefund(
    attempt: Attempt,
    input: CreateRefundInput,
  ): Promise<RefundReceipt & { carried?: Carried }> {
    const { operationId, idempotencyKey } = input;
    let carried: Carried | undefined;
    const op = await log.get(operationId);
    if (!op) throw noIntent(operationId);
    const { actor } = attempt;
    const stripe = deps.stripe(attempt);
    // Best effort, both records of a failed send: the failure itself tells the workflow; the record makes later runs reconcile first.
    const settle = (update: OperationUpdate, event: string, failure: Classified) =>
      log.settle(operationId, update, actor, event, { message: failure.message });
    const record = { ...op, receipt: op.refund };
    const asked = { payment_intent: input.paymentIntentId, amount: input.amount, reason: input.reason };
    const metadata = { order_id: input.orderId, operation_id: operationId };
    const receipt = await sendOnce<typeof record, RefundReceipt, Stripe.Response<Stripe.Refund>>(attempt, {
      ...stripeSend,
      record,
      reconcileFirst: () =>
        outsideDedupeWindow(`operation ${operationId} was first sent at ${op.firstSentAt}`, idempotencyKey),
      // A later version begun since refuses the stamp; if an earlier send of this one is open, that comes first.
      stamp: async (onWireForMs) => {
        try {
          await log.markSent(operationId, actor, onWireForMs);
        } catch (err) {
          if (!(err instanceof LaterVersionError) || op.requestsSent <= (op.provenAbsentThrough ?? 0)) throw err;
          const message = `${err.message}; an earlier send of it is not settled`;
          throw new Classified('UNKNOWN_OUTCOME', 'may_have_executed', 'later_version_exists', message, { cause: err });
        }
      },
      request: (timeout) => stripe.refunds.create({ ...asked, metadata }, { idempotencyKey, timeout }),
      recordUnknown: (failure) =>
        settle({ status: 'unknown', reason: failure.reason }, 'refund_outcome_unknown', failure),
      recordAbsent: async (failure, ifRequestsSent) => {
        const absenceConfirmedAt = new Date(await log.clock()).toISOString();
        const proof = { status: 'intent' as const, reason: failure.reason, absenceConfirmedAt, ifRequestsSent };
        await settle(proof, 'refund_not_executed', failure);
      },
      receiptOf: (refund) => toReceipt(refund, refund.lastResponse.headers['idempotent-replayed'] === 'true'),
      // The provider's answer on the operation's record: a refund for less than asked, or one already failed, as it is.
      recordReceipt: async (refund, receipt) => {
        const order = carriedUpdate(input, receipt);
        const settled = await log.settle(
          operationId,
          refundUpdate(refund, receipt, input),
          actor,
          'refund_confirmed',
          { requestId: refund.lastResponse.requestId ?? null },
          order && ((tx) => order.write(tx, actor)),
        );
        if (settled.carried) carried = { update_order: { input: order!.input, output: settled.carried } };
      },
      notRecorded: (refund, err) =>
        receiptNotRecorded(err, `refund ${refund.id} was made`, {
          providerRequestId: refund.lastResponse.requestId ?? null,
          provider: { refundId: refund.id },
        }),
    });
    if (!carried) return receipt;
    // The carried step's attempt is counted as its own task's would be; a meter that refuses changes nothing recorded.
    try {
      metrics().attempted('update_order', 'store', null, 0);
    } catch {
      // metrics are best effort
    }
    return { ...receipt, carried };
  }

  /** The order update the receipt carries, when the run asked for it and the receipt lets the saga go on to the order. */
  function carriedUpdate(input: CreateRefundInput, receipt: RefundReceipt) {
    const { carryRefund } = deps;
    if (!carryRefund || !input.carry?.includes('update_order') || receiptAgainstAsk(receipt, input) !== 'fits') return;
    const update = orderUpdateOf(input.orderId, input.operationId, receipt);
    const { key, orderId, operationId, refundId, amount } = update;
    const { workflowId, runId } = Context.current().info.workflowExecution!;
    const row = { key, step: 'update_order', operationId, workflowId, runId, attempt: 1 };
    return {
      input: update,
      write: (tx: Queryable, actor: string) =>
        carryRefund(
          tx,
          { orderId, operationId, refundId, amount, actor },
          row,
          succeeded({ requests: 0, providerRequestId: null }),
        ),
    };
  }

  /** Throws `err` classified, with the operation's record after it among its facts (best effort: the failure stands without them). */
  async function failWithRecord(operationId: string, err: unknown): Promise<never> {
    const c = paymentFailure(true)(err);
    const op = await log.get(operationId).catch(() => undefined);
    if (!op) throw c;
    const { status: operationStatus, requestsSent, provenAbsentThrough } = op;
    throw new Classified(c.code, c.certainty, c.reason, c.message, {
      ...c.extra,
      provider: { ...c.extra.provider, operationStatus, requestsSent, provenAbsentThrough },
    });
  }

  return { createRefund };
}

/** Refused before anything is sent or asked: the operation has no intent on record. */
export function noIntent(operationId: string) {
  const message = `no intent is recorded for operation ${operationId}; the provider was not called`;
  return new Classified('INVALID_ARGUMENTS', 'not_executed', 'no_intent', message);
}

/** What every Stripe send under a key shares: its dedupe window on the store's clock, its replay, timeout and failures. */
export function stripeSendParts(windows: ProviderWindows, clock: () => Promise<number>) {
  return {
    insideWindow: async (record: Pick<OperationRecord, 'firstSentAt'>) =>
      insideDedupeWindow(windows, record, await clock()),
    replayed: <R extends { replayed: boolean }>(receipt: R): R => ({ ...receipt, replayed: true }),
    maxRequestMs: windows.requestTimeoutMs,
    classify: (err: unknown) => stripeFailure(err, true),
    provesNothingSent,
  };
}

/**
 * A failed send that proves it made nothing: it never left, or Stripe itself (its request id on the answer) refused it
 * below 500. A 5xx, or an answer without Stripe's request id (a proxy's), may have gone on to Stripe.
 */
function provesNothingSent(failure: Classified): boolean {
  if (failure.certainty !== 'not_executed') return false;
  if (failure.reason === 'attempt_time_spent' || failure.reason === 'connection_failed_before_send') return true;
  const status = failure.extra.provider?.statusCode;
  return typeof status === 'number' && status < 500 && !!failure.extra.providerRequestId;
}
