// Order activities: the refund applied to the order and, as a compensation, taken off again.
// Both are idempotent in the store (by operation id, by compensation key), so a retry, a rerun
// or a reset replays the first receipt.
import type { Evidenced, OrderReceipt } from '../contract';
import type { ApplyRefundInput, OrderStore, RevertRefundInput } from '../store';
import { recordingEffect, stepCall, type AttemptRunner } from './attempt';
import { storeFailure } from './store-failures';

export function createOrderActivities(deps: { store: OrderStore; attempt: AttemptRunner }) {
  const { store, attempt } = deps;

  return {
    /** `key` is the step's key (the operation id's update_order key), for the attempt ledger. */
    async applyRefund(input: ApplyRefundInput & { key: string }): Promise<Evidenced<OrderReceipt>> {
      const { key, ...apply } = input;
      return attempt(stepCall('update_order', { key, operationId: input.operationId }, 'store'), storeFailure, (a) =>
        recordingEffect(a, () => store.applyRefund({ ...apply, actor: a.actor })),
      );
    },

    async revertRefund(input: RevertRefundInput): Promise<Evidenced<OrderReceipt>> {
      return attempt(
        stepCall('update_order:compensate', { ...input, key: input.compensationKey }, 'store'),
        storeFailure,
        (a) => store.revertRefund({ ...input, actor: a.actor }),
      );
    },
  };
}
