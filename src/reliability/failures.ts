// The closed set of failure types our activities raise. Workflow code reads `failure.type`
// to decide the next safe move; the next issue grows this into the full failure taxonomy.
export const FailureType = {
  /** Input that can never succeed; retrying changes nothing. */
  InvalidInput: 'INVALID_INPUT',
  OrderNotFound: 'ORDER_NOT_FOUND',
  /** Another writer changed the order first; reload canonical state and try again. */
  OrderVersionConflict: 'ORDER_VERSION_CONFLICT',
  /** The provider refused the request for a business reason (e.g. more than is refundable). */
  PaymentRejected: 'PAYMENT_REJECTED',
  /** The same idempotency key was sent with different parameters: a changed intent, not a retry. */
  IdempotencyKeyReused: 'IDEMPOTENCY_KEY_REUSED',
  /** A request with the same key is still in flight at the provider. */
  IdempotencyKeyInFlight: 'IDEMPOTENCY_KEY_IN_FLIGHT',
  PermissionDenied: 'PERMISSION_DENIED',
  RateLimited: 'RATE_LIMIT',
  /** The dependency could not be reached or answered 5xx. Safe to resend only with the same key. */
  DependencyUnavailable: 'DEPENDENCY_UNAVAILABLE',
  /** The refund is still pending at the provider. */
  RefundPending: 'REFUND_PENDING',
  /** The provider reports the refund failed or was cancelled after it was accepted. */
  RefundFailed: 'REFUND_FAILED',
  /** The mail server refused the message for good (e.g. 5xx recipient rejected). */
  NotificationRejected: 'NOTIFICATION_REJECTED',
  /** The message may have reached the mail server and nobody knows: resending could mail the customer twice. */
  NotificationOutcomeUnknown: 'NOTIFICATION_OUTCOME_UNKNOWN',
} as const;

export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Types that no retry can fix: the activity retry policy stops at once on these. */
export const NON_RETRYABLE_FAILURES: FailureType[] = [
  FailureType.InvalidInput,
  FailureType.OrderNotFound,
  FailureType.PaymentRejected,
  FailureType.IdempotencyKeyReused,
  FailureType.PermissionDenied,
  FailureType.RefundFailed,
  FailureType.NotificationRejected,
  FailureType.NotificationOutcomeUnknown,
];
