// The store mapping table, row by row: each row has an example that reaches it first, and every row has one.
import { classifyStoreError, STORE_RULES } from '../../src/activities/store-failures';
import {
  IntentConflictError,
  InvalidOperationError,
  LaterVersionError,
  OperationInFlightError,
  OrderNotFoundError,
  RefundExceedsOrderError,
  VersionConflictError,
} from '../../src/store';

const sqlite = (code: string) => Object.assign(new Error(code), { code });

const examples: [string, unknown, { code: string; certainty: string; reason: string }][] = [
  ['order not found', new OrderNotFoundError('x'), { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'order_not_found' }],
  ['refund exceeds the order', new RefundExceedsOrderError('x'), { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'refund_exceeds_order' }],
  ['version conflict', new VersionConflictError('x'), { code: 'STATE_CONFLICT', certainty: 'not_executed', reason: 'version_conflict' }],
  ['changed intent under a recorded key', new IntentConflictError('x'), { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'intent_conflict' }],
  ['a later version of the order exists', new LaterVersionError('x'), { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'later_version_exists' }],
  ['another version of the order in flight', new OperationInFlightError('x'), { code: 'STATE_CONFLICT', certainty: 'not_executed', reason: 'another_operation_in_flight' }],
  ['invalid operation', new InvalidOperationError('x'), { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'invalid_operation' }],
  ['busy database', sqlite('SQLITE_BUSY'), { code: 'CAPACITY', certainty: 'not_executed', reason: 'database_busy' }],
  ['locked table', sqlite('SQLITE_LOCKED_SHAREDCACHE'), { code: 'CAPACITY', certainty: 'not_executed', reason: 'database_locked' }],
  ['disk full', sqlite('SQLITE_FULL'), { code: 'CAPACITY', certainty: 'not_executed', reason: 'disk_full' }],
  ['I/O error', sqlite('SQLITE_IOERR_WRITE'), { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'database_error' }],
  ['a bug', new TypeError('undefined is not a function'), { code: 'POISON', certainty: 'undeterminable', reason: 'unclassified_error' }],
];

it.each(examples)('%s', (_label, error, expected) => {
  expect(classifyStoreError(error)).toEqual(expected);
});

it('has an example for every row of the table', () => {
  const reached = new Set(examples.map(([, error]) => STORE_RULES.findIndex((r) => r.when(error))));
  expect(STORE_RULES.map((_r, i) => i).filter((i) => !reached.has(i))).toEqual([]);
});
