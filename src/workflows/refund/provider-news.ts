// The provider's events (Stripe webhooks) a run received as a Signal, each once, after the receiver checked their
// signature and recorded them: what a run awaiting the provider wakes on, and the provider's word that its refund
// failed, which the run acts on or hands to the follow-up. Every run keeps them in its state for operators.
import type { ProviderEventSummary } from '../../contract';
import { lifecycleRank } from '../../domain/order';

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

export class ProviderNews {
  /** In arrival order, each once. */
  readonly events: ProviderEventSummary[] = [];
  /** Failure events the run already took to the provider while parked: each is looked into once. */
  readonly checkedFailures = new Set<string>();

  /** `effect`: what the run holds of its refund now. */
  constructor(private readonly effect: () => { status: string; refundId: string | null }) {}

  /** Keeps an event once; returns why it ignored one about another refund than `mine`, once the run knows its own. */
  record(e: ProviderEventSummary, mine: string | null | undefined): string | undefined {
    if (mine && e.refundId !== mine) return `names refund ${e.refundId}, not this run's refund ${mine}`;
    if (this.events.some((x) => x.id === e.id)) return;
    // Past the cap, only an event that moves its refund further along is kept: a failure that comes late is never dropped.
    const further =
      lifecycleRank(e.refundStatus) > lifecycleRank(furthestEvent(this.events, e.refundId)?.refundStatus ?? 'pending');
    if (this.events.length >= MAX_PROVIDER_EVENTS && !further) return;
    this.events.push(e);
    return undefined;
  }

  /**
   * The provider's signed word that the run's refund failed (or was canceled), while the run still
   * holds it as standing: news the run must act on, or hand to the follow-up when it ends.
   */
  unactedFailure(): ProviderEventSummary | undefined {
    const { status, refundId } = this.effect();
    if (!refundId || (status !== 'refunded' && status !== 'partial')) return undefined;
    const e = furthestEvent(this.events, refundId);
    return e && lifecycleRank(e.refundStatus) === 2 ? e : undefined;
  }

  /** A failure not yet taken to the provider while parked. */
  uncheckedFailure(): ProviderEventSummary | undefined {
    const e = this.unactedFailure();
    return e && !this.checkedFailures.has(e.id) ? e : undefined;
  }
}
