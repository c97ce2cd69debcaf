// The SMTP mapping table, row by row: each row has an example that reaches it first, and every row has one.
import type { NodemailerError } from 'nodemailer';
import { classifySmtpError, SMTP_RULES, smtpFacts, smtpRetryAfterMs } from '../../src/activities/smtp-failures';

const err = (fields: Partial<NodemailerError>) => Object.assign(new Error('smtp'), fields) as NodemailerError;
const reply = (responseCode: number, response: string, command = 'RCPT TO') =>
  err({ code: 'EENVELOPE', responseCode, response, command });

const examples: [string, NodemailerError, { code: string; certainty: string; reason: string }][] = [
  [
    '553 bad address',
    reply(553, '553 5.1.3 bad address syntax'),
    { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'address_invalid' },
  ],
  [
    '503 bad sequence',
    reply(503, '503 5.5.1 bad sequence of commands', 'DATA'),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'bad_sequence' },
  ],
  [
    '550 recipient rejected',
    reply(550, '550 5.1.1 user unknown'),
    { code: 'PERMANENT_BUSINESS', certainty: 'not_executed', reason: 'recipient_rejected' },
  ],
  [
    '452 storage full',
    reply(452, '452 4.3.1 insufficient system storage'),
    { code: 'CAPACITY', certainty: 'not_executed', reason: 'server_storage_full' },
  ],
  [
    '451 rate limited in words',
    reply(451, '451 4.7.0 rate limited, retry after 2s'),
    { code: 'RATE_LIMIT', certainty: 'not_executed', reason: 'rate_limited' },
  ],
  [
    '421 service busy',
    reply(421, '421 4.3.2 service not available', 'MAIL FROM'),
    { code: 'RATE_LIMIT', certainty: 'not_executed', reason: 'service_busy' },
  ],
  [
    '451 local error after the message',
    reply(451, '451 4.3.0 local error', 'DATA'),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'temporary_failure' },
  ],
  [
    'invalid envelope before sending',
    err({ code: 'EENVELOPE', command: 'API' }),
    { code: 'INVALID_ARGUMENTS', certainty: 'not_executed', reason: 'envelope_invalid' },
  ],
  [
    'nodemailer refused before writing',
    err({ code: 'EMESSAGE', command: 'API' }),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'client_refused' },
  ],
  [
    'DNS failure',
    err({ code: 'EDNS' }),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'dns_failed' },
  ],
  [
    'connect timeout',
    err({ code: 'ETIMEDOUT', timeoutType: 'CONNECT_TIMEOUT' } as Partial<NodemailerError>),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'connect_timeout' },
  ],
  [
    'connection refused',
    err({ code: 'ESOCKET', originalCode: 'ECONNREFUSED', command: 'CONN' } as Partial<NodemailerError>),
    { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'connection_refused' },
  ],
  [
    'no reply to the message in time',
    err({ code: 'ETIMEDOUT', timeoutType: 'SOCKET_TIMEOUT' } as Partial<NodemailerError>),
    { code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'reply_timeout' },
  ],
  [
    'connection lost after DATA',
    err({ code: 'ECONNECTION', command: 'CONN' }),
    { code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'connection_lost' },
  ],
];

it.each(examples)('%s', (_label, error, expected) => {
  expect(classifySmtpError(error)).toMatchObject(expected);
});

it('has an example for every row of the table', () => {
  const reached = new Set(examples.map(([, error]) => SMTP_RULES.findIndex((r) => r.when(smtpFacts(error)))));
  expect(SMTP_RULES.map((_r, i) => i).filter((i) => !reached.has(i))).toEqual([]);
});

it('reads a wait the server states in words', () => {
  expect(smtpRetryAfterMs('451 4.7.0 rate limited, retry after 2s')).toBe(2000);
  expect(smtpRetryAfterMs('421 try again in 3 seconds')).toBe(3000);
  expect(smtpRetryAfterMs('450 retry after 1 minute')).toBe(60_000);
  expect(smtpRetryAfterMs('450 retry after 500ms')).toBe(500);
  expect(smtpRetryAfterMs('451 local error')).toBeNull();
  expect(smtpRetryAfterMs(null)).toBeNull();
});
