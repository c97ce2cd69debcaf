// A provider event (a Stripe webhook) as the receiver hands it to a run, after it checked its
// signature and recorded it in the store; the schema the run's handler parses it with.
import { z } from 'zod';

const text = (max: number) => z.string().min(1).max(max);
/** What the receiver sends; anything else is ignored by the handler. Fields a newer receiver adds are dropped. */
export const providerEventSchema = z.object({
  /** The provider's event id: a redelivered event has the same one and is kept once. */
  id: text(255),
  type: text(255),
  refundId: text(255),
  refundStatus: text(64),
  /** The refund's amount and currency as the signed event gave them (absent from receivers before they were sent). */
  amount: z.number().int().min(0).optional(),
  currency: text(16).optional(),
  /** The event's own time, unix seconds. */
  created: z.number(),
  receivedAt: text(64),
});
export type ProviderEventSummary = z.output<typeof providerEventSchema>;
