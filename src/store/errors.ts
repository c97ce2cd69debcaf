// The store's errors: each says what the caller may do next (src/activities/store-failures.ts classifies them).

/** Another writer changed the order between our read and our write. */
export class VersionConflictError extends Error {
  override name = 'VersionConflictError';
}

export class OrderNotFoundError extends Error {
  override name = 'OrderNotFoundError';
}

/** The request can never succeed as asked (bad amount, reverting an operation never applied). */
export class InvalidOperationError extends Error {
  override name = 'InvalidOperationError';
}

/** The refund would take the order's refunded total above the amount paid. */
export class RefundExceedsOrderError extends InvalidOperationError {
  override name = 'RefundExceedsOrderError';
}

/** A key or operation already recorded arrived with different parameters: a changed intent, not a retry. */
export class IntentConflictError extends Error {
  override name = 'IntentConflictError';
}

/** The order already has a later operation version: an earlier one is never created or sent after it. */
export class LaterVersionError extends Error {
  override name = 'LaterVersionError';
}

/** Another operation on the same order has a request out whose outcome is not settled. */
export class OperationInFlightError extends Error {
  override name = 'OperationInFlightError';
}

/** A request asked to go out under an attempt whose ledger row has ended: it is not sent. */
export class AttemptEndedError extends Error {
  override name = 'AttemptEndedError';
}

/** What an IntentConflictError names: each field whose stored value differs from the one asked for. */
export function differences<T extends object>(stored: T, wanted: T, fields: (keyof T)[]): string[] {
  return fields
    .filter((f) => JSON.stringify(stored[f]) !== JSON.stringify(wanted[f]))
    .map((f) => `${String(f)}: stored ${JSON.stringify(stored[f])}, got ${JSON.stringify(wanted[f])}`);
}

/** An amount the store takes: a positive whole number of minor units, or InvalidOperationError. */
export function requireMinorUnits(what: string, value: number): void {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOperationError(`${what} must be a positive whole number of minor units, got ${value}`);
  }
}
