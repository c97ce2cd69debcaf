// Provider events (Stripe webhooks) handed to a refund's run as a Signal, after the receiver
// checked their signature and recorded them in the store. A run awaiting the provider wakes on one
// that settles its refund; every run keeps them in its state for operators.
import type { ProviderEventSummary } from '../contract';
import { lifecycleRank } from '../domain/order';

/** At most this many are kept in a run's state. */
export const MAX_PROVIDER_EVENTS = 100;

/** The furthest event for a refund, or undefined when none was received. */
export function furthestEvent(
  events: readonly ProviderEventSummary[],
  refundId: string,
): ProviderEventSummary | undefined {
  let furthest: ProviderEventSummary | undefined;
  for (const e of events) {
    if (e.refundId !== refundId) continue;
    if (!furthest || lifecycleRank(e.refundStatus) > lifecycleRank(furthest.refundStatus)) furthest = e;
  }
  return furthest;
}
