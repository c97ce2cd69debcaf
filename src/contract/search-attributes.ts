// Custom search attributes registered with the server, so runs can be filtered in the CLI and Web UI.
// Upserted by the workflows, set at start and read by the clients.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const SEARCH_ATTRIBUTES = {
  orderId: defineSearchAttributeKey('RefundOrderId', SearchAttributeType.KEYWORD),
  status: defineSearchAttributeKey('RefundStatus', SearchAttributeType.KEYWORD),
  /** The phase: the step the run is at, or stopped at. */
  step: defineSearchAttributeKey('RefundStep', SearchAttributeType.KEYWORD),
  /** What is known of the refund: none, unknown, refunded, partial, failed. */
  effect: defineSearchAttributeKey('RefundEffect', SearchAttributeType.KEYWORD),
  verdict: defineSearchAttributeKey('RefundVerdict', SearchAttributeType.KEYWORD),
  needsAttention: defineSearchAttributeKey('RefundNeedsAttention', SearchAttributeType.BOOL),
  /** On a follow-up run (a refund that failed after its run finished): the run it follows up. */
  followUpOf: defineSearchAttributeKey('RefundFollowUpOf', SearchAttributeType.KEYWORD),
};
