// The fence for earlier operations: an earlier operation on this order whose effect the order may
// not show comes first, since this one could refund on top of it. This run never sends another
// operation's request, and once this later version exists the store never lets an earlier one send.
import { REFUND_SAGA } from '../../compensations/registry';
import type { BeginResult, RefundReceipt } from '../../contract';
import { Stopped } from '../../saga/workflow/run-stopped';
import { StepFailedError } from '../../saga/workflow/step-failure';
import { reconcile } from './reconcile';
import { targetOf } from './refund-effect';
import type { RefundRun } from './run';
import { orderUpdate } from './steps';
import { earlierRefunded, earlierUnknown } from './stop-reasons';

/**
 * Each earlier operation is asked about at the provider: proven absent or failed, it is settled; if
 * its refund exists, it is recorded on the order and this run stops for a person, since it was asked
 * for while that refund looked lost or pending; still unknown, this run waits within its budget, then stops.
 */
export async function settleEarlier(run: RefundRun, begin: BeginResult): Promise<Stopped<'load_order'> | undefined> {
  // An operation whose own refund exists finishes its order update and email whatever came after it.
  if (begin.operation.refund) return;
  for (const other of begin.blockers) {
    run.setStatus('reconciling', 'load_order');
    const target = targetOf(other.operationId, other.request, begin.order.paymentIntentId);
    const settled = await reconcile(run, target, false);
    if (settled.kind === 'completed' || settled.kind === 'partial')
      return recordEarlier(run, other.operationId, settled.refund);
    if (settled.kind === 'unknown') {
      const why = earlierUnknown(other.operationId, run.request.orderId, settled.note);
      return new Stopped('needs_attention', why, 'load_order');
    }
  }
  run.setStatus('running');
}

/** An earlier operation's refund exists: put it on the order (its own forward repair, idempotent by its id) and stop this run. */
async function recordEarlier(run: RefundRun, operationId: string, refund: RefundReceipt) {
  const earlier = orderUpdate(run, refund, operationId);
  const recorded = await run.calls.call('record earlier refund', REFUND_SAGA.update_order, earlier).then(
    () => 'it is now recorded on the order',
    (err: unknown) => {
      if (!(err instanceof StepFailedError)) throw err;
      return `recording it on the order failed (${err.error.message})`;
    },
  );
  return new Stopped('needs_attention', earlierRefunded(operationId, refund, recorded), 'load_order');
}
