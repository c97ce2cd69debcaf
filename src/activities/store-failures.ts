// Every error the order store can raise (SQLite, PostgreSQL), classified by one table. A store call is one transaction
// that committed nothing when it throws, unless the connection broke while it was out: the (idempotent) retry settles it.
import { Classified } from './attempt';
import { classifyBy, rule, type Rule } from './failure-rules';
import {
  IntentConflictError,
  InvalidOperationError,
  LaterVersionError,
  OperationInFlightError,
  OrderNotFoundError,
  RefundExceedsOrderError,
  VersionConflictError,
  pgCode,
  sqliteCode,
} from '../store';

const pgClass = (err: unknown): string | undefined => pgCode(err)?.slice(0, 2);
const socketCode = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) ? code : undefined;
};
const message = (err: unknown): string => (err instanceof Error ? err.message : '');
/** pg's own errors for a connection that never came up: nothing was sent. */
const neverConnected = (e: unknown) =>
  ['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH'].includes(socketCode(e) ?? '') ||
  /timeout exceeded when trying to connect|Connection terminated due to connection timeout/.test(message(e));
/** A connection that broke while a call was out: its COMMIT may or may not have reached the server. */
const connectionLost = (e: unknown) =>
  pgClass(e) === '08' ||
  /^57P0[12]$/.test(pgCode(e) ?? '') ||
  ['ECONNRESET', 'EPIPE', 'ETIMEDOUT'].includes(socketCode(e) ?? '') ||
  /Connection terminated/.test(message(e));

/** Any other error the database itself raised. */
const fromDatabase = (e: unknown) => sqliteCode(e) !== undefined || pgCode(e) !== undefined;

export const STORE_RULES: Rule<unknown>[] = [
  rule((e) => e instanceof OrderNotFoundError, 'PERMANENT_BUSINESS', 'not_executed', 'order_not_found'),
  rule((e) => e instanceof RefundExceedsOrderError, 'PERMANENT_BUSINESS', 'not_executed', 'refund_exceeds_order'),
  // Another writer changed the order after we read it: the next attempt reloads and applies again.
  rule((e) => e instanceof VersionConflictError, 'STATE_CONFLICT', 'not_executed', 'version_conflict'),
  rule((e) => e instanceof IntentConflictError, 'INVALID_ARGUMENTS', 'not_executed', 'intent_conflict'),
  // A later version of the order exists: an earlier one is never sent after it (it could refund twice).
  rule((e) => e instanceof LaterVersionError, 'PERMANENT_BUSINESS', 'not_executed', 'later_version_exists'),
  // Another version of the order has a request out: wait for it to settle; nothing was sent.
  rule((e) => e instanceof OperationInFlightError, 'STATE_CONFLICT', 'not_executed', 'another_operation_in_flight'),
  rule((e) => e instanceof InvalidOperationError, 'INVALID_ARGUMENTS', 'not_executed', 'invalid_operation'),
  // Another connection held the write lock past busy_timeout: the database is overloaded, our transaction rolled back.
  rule((e) => sqliteCode(e)?.startsWith('SQLITE_BUSY') === true, 'CAPACITY', 'not_executed', 'database_busy'),
  rule((e) => sqliteCode(e)?.startsWith('SQLITE_LOCKED') === true, 'CAPACITY', 'not_executed', 'database_locked'),
  rule((e) => sqliteCode(e) === 'SQLITE_FULL' || pgCode(e) === '53100', 'CAPACITY', 'not_executed', 'disk_full'),
  // PostgreSQL: another transaction held the row past lock_timeout, or kept aborting ours for serializability.
  rule((e) => pgCode(e) === '55P03', 'CAPACITY', 'not_executed', 'database_busy'),
  rule((e) => pgCode(e) === '40001' || pgCode(e) === '40P01', 'CAPACITY', 'not_executed', 'database_contention'),
  rule((e) => pgClass(e) === '53', 'CAPACITY', 'not_executed', 'database_resources'),
  rule(neverConnected, 'TRANSIENT_DEPENDENCY', 'not_executed', 'database_unreachable'),
  rule(connectionLost, 'TRANSIENT_DEPENDENCY', 'may_have_executed', 'database_connection_lost'),
  // A statement the server refused as written (bad data, a broken constraint, SQL it cannot run) is a bug, not a passing fault.
  rule((e) => ['22', '23', '42'].includes(pgClass(e) ?? ''), 'POISON', 'not_executed', 'database_refused_statement'),
  rule(fromDatabase, 'TRANSIENT_DEPENDENCY', 'not_executed', 'database_error'),
  rule(() => true, 'POISON', 'undeterminable', 'unclassified_error'),
];

/** A store error (or anything thrown while using the store) as a classified failure. */
export function storeFailure(err: unknown): Classified {
  if (err instanceof Classified) return err;
  const c = classifyStoreError(err);
  return new Classified(c.code, c.certainty, c.reason, (err as Error)?.message ?? String(err), { cause: err });
}

export const classifyStoreError = (err: unknown) => classifyBy(STORE_RULES, err);

/** The provider made the effect and only its record failed: a retry under the same key (or a lookup) recovers the receipt. */
export function receiptNotRecorded(err: unknown, made: string, extra: Classified['extra']): Classified {
  const c = storeFailure(err);
  const message = `${made}, but its receipt could not be recorded: ${c.message}`;
  return new Classified(c.code, 'completed', 'receipt_not_recorded', message, { ...extra, cause: err });
}
