// Evidence as operators see it: attempts tallied from the ledger, customer addresses masked.
import { tally } from '../../src/reliability/attempt-ledger';
import { maskEmails, redact } from '../../src/reliability/redaction';

it('masks customer addresses but keeps our Message-IDs whole', () => {
  expect(maskEmails('refused dana.smith@example.test and bob@mail.example.org')).toBe(
    'refused d***@example.test and b***@mail.example.org',
  );
  expect(maskEmails('check <refund.test.ord_1.v1.notify_customer@durable-refunds.local>')).toBe(
    'check <refund.test.ord_1.v1.notify_customer@durable-refunds.local>',
  );
  expect(maskEmails('no address here')).toBe('no address here');
});

it('masks addresses anywhere in a nested value, without changing the rest', () => {
  const value = { order: { customerEmail: 'a@example.test', amount: 5 }, notes: ['to b@example.test'], at: null };
  expect(redact(value)).toEqual({
    order: { customerEmail: 'a***@example.test', amount: 5 },
    notes: ['to b***@example.test'],
    at: null,
  });
  expect(value.order.customerEmail).toBe('a@example.test');
});

it('tallies attempts and provider requests from the ledger', () => {
  const attempt = (n: number, requests: number) => ({
    attempt: n,
    startedAt: '',
    finishedAt: '',
    outcome: 'ok',
    certainty: null,
    reason: null,
    transportRequests: requests,
    retryAfterMs: null,
    nextDelayMs: null,
    providerRequestId: null,
  });
  expect(tally({ attempt: 3, ledger: [attempt(1, 1), attempt(2, 1), attempt(3, 1)] })).toEqual({
    attempts: 3,
    transportRequests: 3,
  });
  // A ledger that could not be written still leaves the attempt number Temporal reported.
  expect(tally({ attempt: 2, ledger: [] })).toEqual({ attempts: 2, transportRequests: 0 });
  expect(tally(undefined)).toEqual({ attempts: 0, transportRequests: 0 });
});
