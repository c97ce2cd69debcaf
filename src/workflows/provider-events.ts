// Provider events (Stripe webhooks) handed to a refund's run as a Signal, after the receiver
// checked their signature and recorded them in the store. A run awaiting the provider wakes on one
// that settles its refund; every run keeps them in its state for operators.
import { defineSignal } from '@temporalio/workflow';
import { z } from 'zod';

export interface ProviderEventSummary {
  /** The provider's event id: a redelivered event has the same one and is kept once. */
  id: string;
  type: string;
  refundId: string;
  refundStatus: string;
  /** The refund's amount and currency as the signed event gave them (absent from receivers before they were sent). */
  amount?: number;
  currency?: string;
  /** The event's own time, unix seconds. */
  created: number;
  receivedAt: string;
}

export const providerEventSignal = defineSignal<[ProviderEventSummary]>('providerEvent');

const text = (max: number) => z.string().min(1).max(max);
/** What the receiver sends; anything else is ignored by the handler. Fields a newer receiver adds are dropped. */
export const providerEventSchema: z.ZodType<ProviderEventSummary> = z.object({
  id: text(255),
  type: text(255),
  refundId: text(255),
  refundStatus: text(64),
  amount: z.number().int().min(0).optional(),
  currency: text(16).optional(),
  created: z.number(),
  receivedAt: text(64),
});

/** At most this many are kept in a run's state. */
export const MAX_PROVIDER_EVENTS = 100;

/**
 * How far along its lifecycle a refund status is. A refund only moves forward (pending →
 * succeeded → failed; canceled ends it too), so the furthest status any event gave is the refund's
 * status, in whatever order the events came.
 */
export function lifecycleRank(status: string): number {
  if (status === 'failed' || status === 'canceled') return 2;
  if (status === 'succeeded') return 1;
  return 0;
}

/** The furthest event for a refund, or undefined when none was received. */
export function furthestEvent(events: readonly ProviderEventSummary[], refundId: string): ProviderEventSummary | undefined {
  let furthest: ProviderEventSummary | undefined;
  for (const e of events) {
    if (e.refundId !== refundId) continue;
    if (!furthest || lifecycleRank(e.refundStatus) > lifecycleRank(furthest.refundStatus)) furthest = e;
  }
  return furthest;
}
