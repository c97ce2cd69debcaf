// Every error the order store can raise, on SQLite or PostgreSQL, classified into the failure
// taxonomy by one table. Each store call is one transaction: when it throws, nothing it meant to
// write was committed, except when the connection to PostgreSQL broke while the call was out:
// then the commit may have happened, and the retry (every store write is idempotent) settles it.
import type { Certainty, FailureCode } from '../reliability/taxonomy';
import { Classified } from './attempt';
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

export interface StoreRule {
  when: (err: unknown) => boolean;
  code: FailureCode;
  certainty: Certainty;
  reason: string;
}

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

export const STORE_RULES: StoreRule[] = [
  {
    when: (e) => e instanceof OrderNotFoundError,
    code: 'PERMANENT_BUSINESS',
    certainty: 'not_executed',
    reason: 'order_not_found',
  },
  {
    when: (e) => e instanceof RefundExceedsOrderError,
    code: 'PERMANENT_BUSINESS',
    certainty: 'not_executed',
    reason: 'refund_exceeds_order',
  },
  // Another writer changed the order after we read it: the next attempt reloads and applies again.
  {
    when: (e) => e instanceof VersionConflictError,
    code: 'STATE_CONFLICT',
    certainty: 'not_executed',
    reason: 'version_conflict',
  },
  {
    when: (e) => e instanceof IntentConflictError,
    code: 'INVALID_ARGUMENTS',
    certainty: 'not_executed',
    reason: 'intent_conflict',
  },
  // A later version of the order exists: an earlier one is never sent after it (it could refund twice).
  {
    when: (e) => e instanceof LaterVersionError,
    code: 'PERMANENT_BUSINESS',
    certainty: 'not_executed',
    reason: 'later_version_exists',
  },
  // Another version of the order has a request out: wait for it to settle; nothing was sent.
  {
    when: (e) => e instanceof OperationInFlightError,
    code: 'STATE_CONFLICT',
    certainty: 'not_executed',
    reason: 'another_operation_in_flight',
  },
  {
    when: (e) => e instanceof InvalidOperationError,
    code: 'INVALID_ARGUMENTS',
    certainty: 'not_executed',
    reason: 'invalid_operation',
  },
  // Another connection held the write lock past busy_timeout: the database is overloaded, our transaction rolled back.
  {
    when: (e) => sqliteCode(e)?.startsWith('SQLITE_BUSY') === true,
    code: 'CAPACITY',
    certainty: 'not_executed',
    reason: 'database_busy',
  },
  {
    when: (e) => sqliteCode(e)?.startsWith('SQLITE_LOCKED') === true,
    code: 'CAPACITY',
    certainty: 'not_executed',
    reason: 'database_locked',
  },
  {
    when: (e) => sqliteCode(e) === 'SQLITE_FULL' || pgCode(e) === '53100',
    code: 'CAPACITY',
    certainty: 'not_executed',
    reason: 'disk_full',
  },
  // PostgreSQL: another transaction held the row past lock_timeout, or kept aborting ours for serializability.
  { when: (e) => pgCode(e) === '55P03', code: 'CAPACITY', certainty: 'not_executed', reason: 'database_busy' },
  {
    when: (e) => pgCode(e) === '40001' || pgCode(e) === '40P01',
    code: 'CAPACITY',
    certainty: 'not_executed',
    reason: 'database_contention',
  },
  { when: (e) => pgClass(e) === '53', code: 'CAPACITY', certainty: 'not_executed', reason: 'database_resources' },
  { when: neverConnected, code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'database_unreachable' },
  {
    when: connectionLost,
    code: 'TRANSIENT_DEPENDENCY',
    certainty: 'may_have_executed',
    reason: 'database_connection_lost',
  },
  // A statement the server refused as written (bad data, a broken constraint, SQL it cannot run) is a bug, not a passing fault.
  {
    when: (e) => ['22', '23', '42'].includes(pgClass(e) ?? ''),
    code: 'POISON',
    certainty: 'not_executed',
    reason: 'database_refused_statement',
  },
  {
    when: (e) => sqliteCode(e) !== undefined || pgCode(e) !== undefined,
    code: 'TRANSIENT_DEPENDENCY',
    certainty: 'not_executed',
    reason: 'database_error',
  },
  { when: () => true, code: 'POISON', certainty: 'undeterminable', reason: 'unclassified_error' },
];

/** A store error (or anything thrown while using the store) as a classified failure. */
export function storeFailure(err: unknown): Classified {
  if (err instanceof Classified) return err;
  const c = classifyStoreError(err);
  return new Classified(c.code, c.certainty, c.reason, (err as Error)?.message ?? String(err), { cause: err });
}

export function classifyStoreError(err: unknown): { code: FailureCode; certainty: Certainty; reason: string } {
  const rule = STORE_RULES.find((r) => r.when(err))!;
  return { code: rule.code, certainty: rule.certainty, reason: rule.reason };
}

/** The provider made the effect and only its record failed: a retry under the same key (or a lookup) recovers the receipt. */
export function receiptNotRecorded(err: unknown, made: string, extra: Classified['extra']): Classified {
  const c = storeFailure(err);
  const message = `${made}, but its receipt could not be recorded: ${c.message}`;
  return new Classified(c.code, 'completed', 'receipt_not_recorded', message, { ...extra, cause: err });
}
