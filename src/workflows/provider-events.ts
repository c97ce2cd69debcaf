// Provider events (Stripe webhooks) handed to a refund's run as a Signal. For now the run keeps
// them in its state, for operators (the step table, `inspect`); the refund's lifecycle does not
// yet wait on them (issue 8).
import { defineSignal } from '@temporalio/workflow';

export interface ProviderEventSummary {
  /** The provider's event id: a redelivered event has the same one and is kept once. */
  id: string;
  type: string;
  refundId: string;
  refundStatus: string;
  /** The event's own time, unix seconds. */
  created: number;
  receivedAt: string;
}

export const providerEventSignal = defineSignal<[ProviderEventSummary]>('providerEvent');

/** At most this many are kept in a run's state. */
export const MAX_PROVIDER_EVENTS = 100;
