// The reconcileRefund activity: what became of a refund whose outcome is unknown, asked of Stripe and settled in the
// operation's record.
import { lookupKey, type Evidenced, type ReconcileResult, type RefundReceipt } from '../contract';
import type { OperationUpdate } from '../store/types';
import { activityMetrics } from './activity-metrics';
import { stepCall } from './attempt';
import { noIntent, type PaymentDeps } from './create-refund';
import { paymentFailure } from './stripe-failures';
import { insideDedupeWindow, sendsOffTheWireBy } from './request-deadline';
import { listRefunds, refundUpdate, toReceipt } from './stripe-refunds';

export interface ReconcileRefundInput {
  operationId: string;
  /** A refund id known from a failure's details (a refund made whose receipt could not be recorded). */
  refundId?: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
  /** The create step's key: lookups are kept in the attempt ledger under `<key>#reconcile`. */
  idempotencyKey: string;
}

export function refundReconciliation(deps: PaymentDeps) {
  const { log } = deps;
  const metrics = deps.metrics ?? activityMetrics();

  /**
   * By refund id when one is known, else by the payment intent's list. A "not found" is conclusive only once the
   * consistency window has passed since the last send was off the wire, and if nothing was sent since the lookup began.
   */
  async function reconcileRefund(input: ReconcileRefundInput): Promise<Evidenced<ReconcileResult>> {
    const call = stepCall('reconcile', { ...input, key: lookupKey(input.idempotencyKey, 'reconcile') }, 'stripe');
    const answer = await deps.attempt<ReconcileResult>(call, paymentFailure(false), async (attempt) => {
      const op = await log.get(input.operationId);
      if (!op) throw noIntent(input.operationId);
      const known = op.refund?.refundId ?? input.refundId;
      // The provider's answer is as of when we asked, not when it arrived.
      const askedAt = await log.clock();
      const stripe = deps.stripe(attempt);
      const looked = known ? [await stripe.refunds.retrieve(known)] : await listRefunds(stripe, input.paymentIntentId);
      const scanned = looked.length;
      const found = looked.filter((r) => r.metadata?.operation_id === input.operationId);
      const base = {
        method: known ? ('retrieve' as const) : ('list' as const),
        scanned,
        matches: found.length,
        insideDedupeWindow: insideDedupeWindow(deps.windows, op, askedAt),
        requestsSent: op.requestsSent,
      };
      const reply = (
        result: ReconcileResult['result'],
        note: string,
        refund: RefundReceipt | null = null,
        conclusiveAt: string | null = null,
      ): ReconcileResult => ({ ...base, result, refund, conclusiveAt, note });
      const settle = (update: OperationUpdate, detail: Record<string, unknown>) =>
        log.settle(input.operationId, update, attempt.actor, 'reconciled', detail);
      // A refund looked up by id that does not carry this operation proves nothing either way.
      if (found.length === 0 && known)
        return reply('unknown', `refund ${known} does not carry operation ${input.operationId}`);
      if (found.length === 0) {
        const offWire = sendsOffTheWireBy(deps.windows, op);
        const conclusive = offWire === null ? 0 : offWire + deps.windows.consistencyMs;
        const conclusiveAt = offWire === null ? null : new Date(conclusive).toISOString();
        const notFound = (result: ReconcileResult['result'], note: string) => reply(result, note, null, conclusiveAt);
        if (askedAt >= conclusive) {
          const absenceConfirmedAt = new Date(askedAt).toISOString();
          const proof = { status: 'intent' as const, absenceConfirmedAt, ifRequestsSent: op.requestsSent };
          const { applied, record } = await settle(proof, { result: 'not_started_confirmed', scanned });
          if (applied) {
            const why =
              op.lastSentAt === null
                ? 'no request for this operation was ever sent'
                : `no refund carries operation ${input.operationId}, and the consistency window since the last send has passed`;
            return notFound('not_started_confirmed', why);
          }
          const why =
            record.requestsSent !== op.requestsSent
              ? 'it was sent again while it was looked up'
              : `it became ${record.status} meanwhile`;
          return notFound('not_found_inconclusive', `operation ${input.operationId}: ${why}; look again`);
        }
        const detail = { result: 'not_found_inconclusive', scanned, conclusiveAt };
        await log.audit(input.operationId, attempt.actor, 'reconciled', detail);
        return notFound(
          'not_found_inconclusive',
          `no refund carries operation ${input.operationId} yet; the provider's list may lag until ${conclusiveAt}`,
        );
      }
      const refund = found[found.length - 1]!; // the oldest, since Stripe lists newest first
      const receipt = toReceipt(refund, false);
      const extra =
        found.length > 1
          ? `; ${found.length} refunds carry this operation id (${found.map((r) => r.id).join(', ')})`
          : '';
      const update = refundUpdate(refund, receipt, input);
      const result = update.status === 'failed' || update.status === 'partial' ? update.status : 'completed';
      await settle(update, result === 'completed' ? { result, refundId: refund.id } : { result });
      const notes = {
        failed: `refund ${refund.id} ${refund.status} (${refund.failure_reason ?? 'no reason given'})`,
        partial: `refund ${refund.id} is ${refund.amount} ${refund.currency} of the ${input.amount} ${input.currency} asked`,
        completed: `refund ${refund.id} exists (${refund.status})`,
      };
      return reply(result, notes[result] + extra, receipt);
    });
    metrics().reconciled(answer.result);
    return answer;
  }

  return { reconcileRefund };
}
