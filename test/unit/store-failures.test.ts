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
// As pg raises them: the server's errors carry a SQLSTATE and a severity, socket errors a Node code.
const postgres = (code: string) => Object.assign(new Error(code), { code, severity: 'ERROR' });
const socket = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code });

const examples: [string, unknown, { code: string; certainty: string; reason: string }][] = [
  [
    'order not found',
    new OrderNotFoundError('x'),
    { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'order_not_found' },
  ],
  [
    'refund exceeds the order',
    new RefundExceedsOrderError('x'),
    { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'refund_exceeds_order' },
  ],
  [
    'version conflict',
    new VersionConflictError('x'),
    { code: 'STATE_CONFLICT', certainty: 'not_executed', reason: 'version_conflict' },
  ],
  [
    'changed intent under a recorded key',
    new IntentConflictError('x'),
    { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'intent_conflict' },
  ],
  [
    'a later version of the order exists',
    new LaterVersionError('x'),
    { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'later_version_exists' },
  ],
  [
    'another version of the order in flight',
    new OperationInFlightError('x'),
    { code: 'STATE_CONFLICT', certainty: 'not_executed', reason: 'another_operation_in_flight' },
  ],
  [
    'invalid operation',
    new InvalidOperationError('x'),
    { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'invalid_operation' },
  ],
  ['busy database', sqlite('SQLITE_BUSY'), { code: 'CAPACITY', certainty: 'not_executed', reason: 'database_busy' }],
  [
    'locked table',
    sqlite('SQLITE_LOCKED_SHAREDCACHE'),
    { code: 'CAPACITY', certainty: 'not_executed', reason: 'database_locked' },
  ],
  ['disk full', sqlite('SQLITE_FULL'), { code: 'CAPACITY', certainty: 'not_executed', reason: 'disk_full' }],
  [
    'PostgreSQL: lock_timeout',
    postgres('55P03'),
    { code: 'CAPACITY', certainty: 'not_executed', reason: 'database_busy' },
  ],
  [
    'PostgreSQL: serialization failures past the retries',
    postgres('40001'),
    { code: 'CAPACITY', certainty: 'not_executed', reason: 'database_contention' },
  ],
  [
    'PostgreSQL: too many connections',
    postgres('53300'),
    { code: 'CAPACITY', certainty: 'not_executed', reason: 'database_resources' },
  ],
  [
    'PostgreSQL: server refused the connection',
    socket('ECONNREFUSED'),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'database_unreachable' },
  ],
  [
    'PostgreSQL: connection reset mid-call',
    socket('ECONNRESET'),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'may_have_executed', reason: 'database_connection_lost' },
  ],
  [
    'PostgreSQL: unique violation (a bug)',
    postgres('23505'),
    { code: 'POISON', certainty: 'not_executed', reason: 'database_refused_statement' },
  ],
  [
    'I/O error',
    sqlite('SQLITE_IOERR_WRITE'),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'database_error' },
  ],
  [
    'a bug',
    new TypeError('undefined is not a function'),
    { code: 'POISON', certainty: 'undeterminable', reason: 'unclassified_error' },
  ],
];

it.each(examples)('%s', (_label, error, expected) => {
  expect(classifyStoreError(error)).toEqual(expected);
});

it('has an example for every row of the table', () => {
  const reached = new Set(examples.map(([, error]) => STORE_RULES.findIndex((r) => r.when(error))));
  expect(STORE_RULES.map((_r, i) => i).filter((i) => !reached.has(i))).toEqual([]);
});
