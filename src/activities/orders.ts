import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../reliability/failures';
import type { Order, OrderReceipt } from '../shared';
import {
  IntentConflictError,
  InvalidOperationError,
  OrderNotFoundError,
  VersionConflictError,
  type ApplyRefundInput,
  type OrderStore,
  type RevertRefundInput,
} from '../store';

export function createOrderActivities(store: OrderStore) {
  return {
    async getOrder(orderId: string): Promise<Order> {
      const order = await store.getOrder(orderId);
      if (!order) throw toOrderFailure(new OrderNotFoundError(`order ${orderId} does not exist`), { orderId });
      return order;
    },

    async applyRefund(input: ApplyRefundInput): Promise<OrderReceipt> {
      try {
        return await store.applyRefund(input);
      } catch (err) {
        throw toOrderFailure(err, { orderId: input.orderId, operationId: input.operationId });
      }
    },

    async revertRefund(input: RevertRefundInput): Promise<OrderReceipt> {
      try {
        return await store.revertRefund(input);
      } catch (err) {
        throw toOrderFailure(err, { orderId: input.orderId, operationId: input.operationId, compensationKey: input.compensationKey });
      }
    },
  };
}

/** Store errors become typed failures; anything unrecognised (e.g. a locked database) stays a plain, retryable error. */
function toOrderFailure(err: unknown, context: Record<string, string>): unknown {
  const fail = (type: FailureType, nonRetryable: boolean, cause: Error) =>
    ApplicationFailure.create({ type, message: cause.message, nonRetryable, details: [context], cause });
  if (err instanceof OrderNotFoundError) return fail(FailureType.OrderNotFound, true, err);
  // Retryable on purpose: the next attempt reads the order again at its new version.
  if (err instanceof VersionConflictError) return fail(FailureType.OrderVersionConflict, false, err);
  if (err instanceof InvalidOperationError) return fail(FailureType.InvalidInput, true, err);
  if (err instanceof IntentConflictError) return fail(FailureType.IdempotencyKeyReused, true, err);
  return err;
}
