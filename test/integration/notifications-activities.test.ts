import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import {
  createMailTransport,
  createNotificationActivities,
  formatAmount,
  messageIdForKey,
  type RefundNoticeInput,
} from '../../src/activities/notifications';
import { FailureType } from '../../src/reliability/failures';
import { startMailServer, type MailServer, type StoredMessage } from '../../src/servers/mail-server';
import { SqliteOrderStore, type OrderStore } from '../../src/store';
import { activityEnv, failureOf } from '../helpers/activity-env';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'notifications-'));
const { run } = activityEnv();
let server: MailServer;
let store: SqliteOrderStore;
let transport: Transporter;
let activities: ReturnType<typeof createNotificationActivities>;

async function delivered(messageId: string): Promise<StoredMessage[]> {
  const res = await fetch(`${server.apiUrl}/messages?message_id=${encodeURIComponent(messageId)}`);
  return ((await res.json()) as { messages: StoredMessage[] }).messages;
}

function notice(key: string, to = 'dana@example.test'): RefundNoticeInput {
  return { key, orderId: 'ord_1', to, amount: 1250, currency: 'usd', refundId: 're_1' };
}

/** A port nothing listens on, until a test starts a server there. */
function freePort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The store, except that markNotificationSent throws the first time: the crash between the send and its record. */
function failingMarkSentOnce(inner: OrderStore): OrderStore {
  let failed = false;
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'markNotificationSent' && !failed) {
        return async () => {
          failed = true;
          throw new Error('SQLITE_IOERR: disk I/O error');
        };
      }
      const value: unknown = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

beforeAll(async () => {
  server = await startMailServer({ dbPath: path.join(dir, 'mailbox.db') });
  store = new SqliteOrderStore(path.join(dir, 'orders.db'));
  transport = createMailTransport(server.smtpUrl);
  activities = createNotificationActivities({ transport, store, from: 'refunds@durable-refunds.test' });
});

afterAll(async () => {
  transport.close();
  await server.close();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('derives the Message-ID from the key, never at random', () => {
  expect(messageIdForKey('refund-ord_1-v1:notify_customer:v1')).toBe('<refund-ord_1-v1.notify_customer.v1@durable-refunds.local>');
  expect(messageIdForKey('a b/c')).toBe(messageIdForKey('a b/c'));
  expect(messageIdForKey('a b/c')).not.toBe(messageIdForKey('a-b-c'));
  expect(messageIdForKey('a b/c')).toMatch(/^<a-b-c=[0-9a-f]{16}@durable-refunds\.local>$/);
});

it('formats amounts in the currency’s minor units', () => {
  expect(formatAmount(1250, 'usd')).toBe('$12.50');
  expect(formatAmount(1250, 'jpy')).toBe('¥1,250');
  expect(formatAmount(1250, 'kwd')).toMatch(/^KWD\s1\.250$/);
});

it('delivers exactly one message for two calls with the same key', async () => {
  const input = notice('refund-ord_1-v1:notify_customer:v1');
  const first = await run(activities.sendRefundNotice, input);
  expect(first).toEqual({
    key: input.key,
    messageId: '<refund-ord_1-v1.notify_customer.v1@durable-refunds.local>',
    recipient: input.to,
    providerResponse: expect.stringMatching(/^250 OK: stored as message \d+/),
    alreadySent: false,
  });
  const second = await run(activities.sendRefundNotice, input);
  expect(second).toEqual({ ...first, alreadySent: true });

  const messages = await delivered(first.messageId);
  expect(messages).toHaveLength(1);
  expect(messages[0]).toMatchObject({ to: [input.to], subject: 'Your refund of $12.50 for order ord_1' });
  const raw = await (await fetch(`${server.apiUrl}/messages/${messages[0].id}/raw`)).text();
  expect(raw).toContain(`X-Operation-Key: ${input.key}`);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sent', attempts: 2, providerResponse: first.providerResponse });
});

it('sends a correction under its own key', async () => {
  const input = { key: 'refund-ord_1-v1:notify_customer:v1:compensate', orderId: 'ord_1', to: 'dana@example.test', refundId: 're_1', reason: 'the bank reversed it' };
  const receipt = await run(activities.sendRefundCorrection, input);
  const messages = await delivered(receipt.messageId);
  expect(messages).toHaveLength(1);
  expect(messages[0].subject).toBe('Correction: your refund for order ord_1 did not go through');
  await expect(run(activities.sendRefundCorrection, input)).resolves.toMatchObject({ alreadySent: true });
  await expect(delivered(receipt.messageId)).resolves.toHaveLength(1);
});

it('refuses a changed intent under a key already used', async () => {
  const failure = await failureOf(run(activities.sendRefundNotice, notice('refund-ord_1-v1:notify_customer:v1', 'eve@example.test')));
  expect(failure).toMatchObject({ type: FailureType.IdempotencyKeyReused, nonRetryable: true });
});

it('maps a permanent rejection to NOTIFICATION_REJECTED, non-retryable, and does not leave the entry sending', async () => {
  const input = notice('rejected:v1', 'reject-frank@example.test');
  const failure = await failureOf(run(activities.sendRefundNotice, input));
  expect(failure).toMatchObject({ type: FailureType.NotificationRejected, nonRetryable: true });
  expect(failure.details?.[0]).toMatchObject({ responseCode: 550, recipient: input.to });
  // A 550 at RCPT TO proves the message was not accepted, so the entry goes back to pending.
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'pending' });
  await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
});

it('maps a rate limit to RATE_LIMIT and another 4xx to DEPENDENCY_UNAVAILABLE, both retryable; the retry then sends once', async () => {
  const input = notice('throttled:v1');
  server.setFaults((stage) => (stage === 'mail' ? { code: 421, message: '4.7.0 too many messages, slow down' } : undefined));
  await expect(failureOf(run(activities.sendRefundNotice, input))).resolves.toMatchObject({ type: FailureType.RateLimited, nonRetryable: false });
  server.setFaults((stage) => (stage === 'data' ? { code: 451, message: '4.3.0 local error' } : undefined));
  await expect(failureOf(run(activities.sendRefundNotice, input))).resolves.toMatchObject({
    type: FailureType.DependencyUnavailable,
    nonRetryable: false,
  });
  server.setFaults(undefined);
  await expect(run(activities.sendRefundNotice, input)).resolves.toMatchObject({ alreadySent: false });
  await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(1);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sent', attempts: 3 });
});

it('maps an unreachable SMTP server to DEPENDENCY_UNAVAILABLE, retryable, and sends once when it is back', async () => {
  const port = await freePort();
  const down = createMailTransport(`smtp://127.0.0.1:${port}`);
  const later = createNotificationActivities({ transport: down, store, from: 'refunds@durable-refunds.test' });
  const input = notice('down:v1');
  let revived: MailServer | undefined;
  try {
    const failure = await failureOf(run(later.sendRefundNotice, input));
    expect(failure).toMatchObject({ type: FailureType.DependencyUnavailable, nonRetryable: false });
    expect(failure.details?.[0]).toMatchObject({ responseCode: null, code: expect.stringMatching(/^E/) });
    // Connection refused proves nothing was handed over: the entry is free for the next attempt.
    await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'pending', attempts: 1 });

    revived = await startMailServer({ smtpPort: port, dbPath: path.join(dir, 'revived.db') });
    const receipt = await run(later.sendRefundNotice, input);
    expect(receipt).toMatchObject({ alreadySent: false, messageId: messageIdForKey(input.key) });
    const res = await fetch(`${revived.apiUrl}/messages?message_id=${encodeURIComponent(receipt.messageId)}`);
    expect(((await res.json()) as { messages: StoredMessage[] }).messages).toHaveLength(1);
    await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sent', attempts: 2 });
  } finally {
    down.close();
    await revived?.close();
  }
});

it('never resends after the message was handed over but not recorded: the retry reports NOTIFICATION_OUTCOME_UNKNOWN', async () => {
  const flaky = createNotificationActivities({ transport, store: failingMarkSentOnce(store), from: 'refunds@durable-refunds.test' });
  const input = notice('record-lost:v1');
  const messageId = messageIdForKey(input.key);
  await expect(run(flaky.sendRefundNotice, input)).rejects.toThrow(/disk I\/O error/);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });

  const failure = await failureOf(run(flaky.sendRefundNotice, input));
  expect(failure).toMatchObject({ type: FailureType.NotificationOutcomeUnknown, nonRetryable: true });
  expect(failure.message).toContain(`a previous attempt handed the message ${messageId}`);
  expect(failure.message).toMatch(/check the mailbox for that Message-ID before any resend/);
  expect(failure.details?.[0]).toMatchObject({ key: input.key, messageId, recipient: input.to });
  await expect(delivered(messageId)).resolves.toHaveLength(1);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending', attempts: 2 });
});

it('reports NOTIFICATION_OUTCOME_UNKNOWN when the reply to the message never comes, and the retry does not resend', async () => {
  const impatient = nodemailer.createTransport({ url: server.smtpUrl, pool: false, socketTimeout: 300 });
  const stalled = createNotificationActivities({ transport: impatient, store, from: 'refunds@durable-refunds.test' });
  const input = notice('reply-lost:v1');
  server.setFaults((stage) => (stage === 'data' ? { code: 451, message: '4.3.0 too late', delayMs: 2000 } : undefined));
  try {
    const failure = await failureOf(run(stalled.sendRefundNotice, input));
    expect(failure).toMatchObject({ type: FailureType.NotificationOutcomeUnknown, nonRetryable: true });
    expect(failure.details?.[0]).toMatchObject({ key: input.key, code: 'ETIMEDOUT' });
    server.setFaults(undefined);
    await expect(failureOf(run(activities.sendRefundNotice, input))).resolves.toMatchObject({ type: FailureType.NotificationOutcomeUnknown });
    await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });
  } finally {
    server.setFaults(undefined);
    impatient.close();
  }
});

it('lets only one of two concurrent attempts send', async () => {
  const input = notice('concurrent:v1');
  const results = await Promise.allSettled([run(activities.sendRefundNotice, input), run(activities.sendRefundNotice, input)]);
  const sent = results.filter((r) => r.status === 'fulfilled' && !r.value.alreadySent);
  expect(sent).toHaveLength(1);
  for (const other of results.filter((r) => !sent.includes(r))) {
    if (other.status === 'fulfilled') expect(other.value.alreadySent).toBe(true);
    else expect(other.reason).toMatchObject({ type: FailureType.NotificationOutcomeUnknown });
  }
  await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(1);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sent', attempts: 2 });
});
