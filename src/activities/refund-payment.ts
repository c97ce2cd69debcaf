// A saga's charge undone by the refund saga's own send step: a refund operation of its own under the compensation's
// key (its intent committed first), and how the refund stands now asked after, a failure recorded on its operation.
import { type Evidenced, lookupKey, type RefundReceipt } from '../contract';
import type { SendAt } from '../saga/recorded-send';
import { stepCall } from './attempt';
import type { refundCreation } from './create-refund';
import { refundIntent } from './operations';
import { storeFailure } from './store-failures';
import type { StripeDeps } from './stripe-client';
import { paymentFailure } from './stripe-failures';
import { providerFailed, settleProviderFailure, toReceipt } from './stripe-refunds';

export interface PaymentRefund extends SendAt {
  /** The compensating step (`charge_card:compensate`) and the refund operation's scope (`checkout`). */
  step: string;
  scope: string;
  /** What the refund operation is for: the cart or order whose payment it gives back. */
  orderId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
}

export function paymentRefunds(deps: StripeDeps & { createRefund: ReturnType<typeof refundCreation>['createRefund'] }) {
  const { store, attempt } = deps;
  return async function refundPayment(input: PaymentRefund): Promise<Evidenced<RefundReceipt>> {
    const { orderId, amount, currency, paymentIntentId, step } = input;
    const request = { orderId, amount, currency, reason: 'requested_by_customer' as const };
    const intent = refundIntent(input.scope, { ...request, operationVersion: 1 });
    const { operationId } = intent;
    await attempt({ ...stepCall(step, input, 'store'), key: `${input.key}#intent` }, storeFailure, (a) =>
      store.operations.commitIntent({ ...intent, actor: a.actor }),
    );
    const refund = await deps.createRefund({ ...request, operationId, paymentIntentId, idempotencyKey: input.key });
    // The receipt is the provider's first answer. Once the refund exists its receipt is the truth: a look that fails in
    // any way (a cancellation too) leaves that first answer standing, to be asked again, rather than fail the undo.
    const now = await attempt(
      { ...stepCall(step, input, 'stripe'), key: lookupKey(input.key, 'gate') },
      paymentFailure(false),
      async (a) => {
        const found = await deps.stripe(a).refunds.retrieve(refund.refundId);
        const at = { operationId, actor: a.actor, event: 'refund_failed_after_completion' };
        if (providerFailed(found)) await settleProviderFailure(store.operations, found, toReceipt(found, false), at);
        return found;
      },
    ).catch(() => null);
    if (!now) return refund;
    const ledger = [...refund.evidence.ledger, ...now.evidence.ledger];
    return { ...refund, status: now.status ?? refund.status, evidence: { ...refund.evidence, ledger } };
  };
}
