// The store's errors: each says what the caller may do next (src/activities/store-failures.ts classifies them).

/** Named after its class, as logs and failure details show it. */
class StoreError extends Error {
  override name = this.constructor.name;
}

/** Another writer changed the order between our read and our write. */
export class VersionConflictError extends StoreError {}

export class OrderNotFoundError extends StoreError {}

/** The request can never succeed as asked (bad amount, reverting an operation never applied). */
export class InvalidOperationError extends StoreError {}

/** The refund would take the order's refunded total above the amount paid. */
export class RefundExceedsOrderError extends InvalidOperationError {}

/** A key or operation already recorded arrived with different parameters: a changed intent, not a retry. */
export class IntentConflictError extends StoreError {}

/** The order already has a later operation version: an earlier one is never created or sent after it. */
export class LaterVersionError extends StoreError {}

/** Another operation on the same order has a request out whose outcome is not settled. */
export class OperationInFlightError extends StoreError {}

/** A request asked to go out under an attempt whose ledger row has ended: it is not sent. */
export class AttemptEndedError extends StoreError {}

/**
 * Refuses a changed intent: IntentConflictError, its message by `conflict` from each field whose stored value
 * differs from the one asked for. Nothing when they all agree.
 */
export function requireSame<T extends object, K extends keyof T>(
  stored: Pick<T, K>,
  wanted: T,
  fields: K[],
  conflict: (differences: string) => string,
): void {
  const differences = fields
    .filter((f) => JSON.stringify(stored[f]) !== JSON.stringify(wanted[f]))
    .map((f) => `${String(f)}: stored ${JSON.stringify(stored[f])}, got ${JSON.stringify(wanted[f])}`);
  if (differences.length > 0) throw new IntentConflictError(conflict(differences.join('; ')));
}

/** An amount the store takes: a positive whole number of minor units, or InvalidOperationError. */
export function requireMinorUnits(what: string, value: number): void {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOperationError(`${what} must be a positive whole number of minor units, got ${value}`);
  }
}
