import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { ApplicationFailure } from '@temporalio/common';
import Database from 'better-sqlite3';
import nodemailer, { type Transporter } from 'nodemailer';
import { createMailTransport } from '../../src/activities/mail-transport';
import { createNotificationActivities } from '../../src/activities/notifications';
import { formatAmount, type RefundNoticeInput } from '../../src/activities/refund-notice';
import { SEND_CLOCK_MARGIN_MS } from '../../src/activities/request-deadline';
import { messageIdForKey } from '../../src/contract';
import { createAttemptRunner } from '../../src/activities/attempt';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import { parsePolicy } from '../../src/reliability/policy-schema';
import { startMailServer, type MailServer, type StoredMessage } from '../../tools/src/servers/mail-server';
import { openStore, type OrderStore } from '../../src/store';
import { activityEnv, detailsOf, failureOf, type ActivityEnv } from '../helpers/activity-env';
import { DIALECTS, freshDatabase } from '../helpers/databases';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'notifications-'));
const { run } = activityEnv();
let server: MailServer;
let store: OrderStore;
let transport: Transporter;
let activities: ReturnType<typeof createNotificationActivities>;

async function delivered(messageId: string): Promise<StoredMessage[]> {
  const res = await fetch(`${server.apiUrl}/messages?message_id=${encodeURIComponent(messageId)}`);
  return ((await res.json()) as { messages: StoredMessage[] }).messages;
}

let orders = 0;
/** A notice for a fresh order whose customer is `to`: the activity reads the address from the order. */
async function notice(key: string, to = 'dana@example.test', amount = 1250): Promise<RefundNoticeInput> {
  orders += 1;
  const orderId = `ord_${orders}`;
  await store.seedOrder({
    id: orderId,
    paymentIntentId: `pi_${orders}`,
    customerEmail: to,
    currency: 'usd',
    amount: 5000,
  });
  return { key, operationId: `refund:test:${orderId}:v1`, orderId, amount, currency: 'usd', refundId: 're_1' };
}

/**
 * A send's deadline in these tests (maxSendMs): a hand-over older than this, plus the second its bound adds
 * (SEND_CLOCK_MARGIN_MS), is over, whatever became of it. Long enough for a first SMTP session (the server's
 * greeting waits 100 ms) on a busy machine: 300 ms aborted one.
 */
const SEND_DEADLINE_MS = 1000;
const handOverExpired = () => new Promise((r) => setTimeout(r, SEND_DEADLINE_MS + 1100));

function notifications(
  over: { transport?: Transporter; store?: OrderStore; policy?: RecoveryPolicy; maxSendMs?: number } = {},
) {
  const s = over.store ?? store;
  const policy = over.policy ?? DEFAULT_POLICY;
  return createNotificationActivities({
    mail: over.transport ?? transport,
    store: s,
    mailFrom: 'refunds@durable-refunds.test',
    attempt: createAttemptRunner({ policy, log: s.operations }),
    policy,
    maxSendMs: over.maxSendMs ?? SEND_DEADLINE_MS,
  });
}

/** Arms a fault through the mailbox's fault API. */
async function mailFault(fault: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${server.apiUrl}/_faults`, { method: 'POST', body: JSON.stringify(fault) });
  if (!res.ok) throw new Error(`arming ${JSON.stringify(fault)}: ${res.status} ${await res.text()}`);
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
          throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
        };
      }
      const value: unknown = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

beforeAll(async () => {
  server = await startMailServer({ dbPath: path.join(dir, 'mailbox.db'), faultApi: true });
  store = await openStore(`sqlite:${path.join(dir, 'orders.db')}`);
  transport = createMailTransport(server.smtpUrl);
  activities = notifications();
});

afterAll(async () => {
  transport.close();
  await server.close();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('derives the Message-ID from the key, never at random', () => {
  expect(messageIdForKey('refund-ord_1-v1:notify_customer:v1')).toBe(
    '<refund-ord_1-v1.notify_customer.v1@durable-refunds.local>',
  );
  expect(messageIdForKey('a b/c')).toBe(messageIdForKey('a b/c'));
  expect(messageIdForKey('a b/c')).not.toBe(messageIdForKey('a-b-c'));
  expect(messageIdForKey('a b/c')).toMatch(/^<a-b-c=[0-9a-f]{16}@durable-refunds\.local>$/);
});

it('formats amounts in the currency’s minor units', () => {
  expect(formatAmount(1250, 'usd')).toBe('$12.50');
  expect(formatAmount(1250, 'jpy')).toBe('¥1,250');
  expect(formatAmount(1250, 'kwd')).toMatch(/^KWD\s1\.250$/);
});

it('delivers exactly one message for two calls with the same key, to the address the order holds', async () => {
  const input = await notice('refund:test:ord_1:v1:notify_customer');
  const first = await run(activities.sendRefundNotice, input);
  expect(first).toMatchObject({
    key: input.key,
    messageId: '<refund.test.ord_1.v1.notify_customer@durable-refunds.local>',
    recipient: 'd***@example.test',
    providerResponse: expect.stringMatching(/^250 OK: stored as message \d+/),
    alreadySent: false,
    evidence: { attempt: 1, ledger: [expect.objectContaining({ outcome: 'ok', transportRequests: 1 })] },
  });
  const second = await run(activities.sendRefundNotice, input);
  expect(second).toMatchObject({ messageId: first.messageId, alreadySent: true });

  const messages = await delivered(first.messageId);
  expect(messages).toHaveLength(1);
  expect(messages[0]).toMatchObject({
    to: ['dana@example.test'],
    subject: `Your refund of $12.50 for order ${input.orderId}`,
  });
  const raw = await (await fetch(`${server.apiUrl}/messages/${messages[0].id}/raw`)).text();
  expect(raw).toContain(`X-Operation-Key: ${input.key}`);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({
    status: 'sent',
    attempts: 2,
    providerResponse: first.providerResponse,
  });
  await expect(store.operations.auditTrail(input.operationId)).resolves.toEqual([
    expect.objectContaining({ event: 'notification_sent' }),
  ]);
});

it('sends a correction under its own key, in words meant for the customer', async () => {
  const { orderId, operationId } = await notice('unused');
  const input = {
    key: `${operationId}:notify_customer:compensate`,
    operationId,
    orderId,
    refundId: 're_1',
    reason: 'refund_failed' as const,
  };
  const receipt = await run(activities.sendRefundCorrection, input);
  const messages = await delivered(receipt.messageId);
  expect(messages).toHaveLength(1);
  expect(messages[0].subject).toBe(`Correction: your refund for order ${orderId} did not go through`);
  const raw = await (await fetch(`${server.apiUrl}/messages/${messages[0].id}/raw`)).text();
  expect(raw).toContain('your bank or card issuer could not accept the');
  expect(raw).not.toMatch(/expired_or_canceled|failed with|REFUND_/);
  await expect(run(activities.sendRefundCorrection, input)).resolves.toMatchObject({ alreadySent: true });
  await expect(delivered(receipt.messageId)).resolves.toHaveLength(1);
});

it('refuses a changed intent under a key already used', async () => {
  const input = await notice('changed:v1');
  await run(activities.sendRefundNotice, input);
  const failure = await failureOf(run(activities.sendRefundNotice, { ...input, amount: 999 }));
  expect(failure).toMatchObject({ type: 'INVALID_ARGUMENTS', nonRetryable: true });
  expect(detailsOf(failure)).toMatchObject({ reason: 'intent_conflict' });
});

it('maps a permanent rejection to PERMANENT_BUSINESS, masks the address, and does not leave the entry sending', async () => {
  const input = await notice('rejected:v1', 'reject-frank@example.test');
  const failure = await failureOf(run(activities.sendRefundNotice, input));
  expect(failure).toMatchObject({ type: 'PERMANENT_BUSINESS', nonRetryable: true });
  expect(detailsOf(failure)).toMatchObject({
    certainty: 'not_executed',
    provider: { responseCode: 550, recipient: 'r***@example.test' },
  });
  expect(JSON.stringify(failure.details)).not.toContain('reject-frank@');
  expect(failure.message).not.toContain('reject-frank@');
  // A 550 at RCPT TO proves the message was not accepted, so the entry goes back to pending.
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'pending' });
  await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
});

it('maps a rate limit to RATE_LIMIT with the wait the server asked for, and another 4xx to TRANSIENT_DEPENDENCY; the retry then sends once', async () => {
  const input = await notice('throttled:v1');
  server.setFaults((stage) =>
    stage === 'mail' ? { code: 421, message: '4.7.0 too many messages, retry after 3s' } : undefined,
  );
  const limited = await failureOf(run(activities.sendRefundNotice, input));
  expect(limited).toMatchObject({ type: 'RATE_LIMIT', nonRetryable: false });
  expect(limited.nextRetryDelay).toBeGreaterThanOrEqual(3000);
  server.setFaults((stage) => (stage === 'data' ? { code: 451, message: '4.3.0 local error' } : undefined));
  await expect(failureOf(run(activities.sendRefundNotice, input))).resolves.toMatchObject({
    type: 'TRANSIENT_DEPENDENCY',
    nonRetryable: false,
  });
  server.setFaults(undefined);
  await expect(run(activities.sendRefundNotice, input)).resolves.toMatchObject({ alreadySent: false });
  await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(1);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sent', attempts: 3 });
});

it('maps an unreachable SMTP server to TRANSIENT_DEPENDENCY, retryable, and sends once when it is back', async () => {
  const port = await freePort();
  const down = createMailTransport(`smtp://127.0.0.1:${port}`);
  const later = notifications({ transport: down });
  const input = await notice('down:v1');
  let revived: MailServer | undefined;
  try {
    const failure = await failureOf(run(later.sendRefundNotice, input));
    expect(failure).toMatchObject({ type: 'TRANSIENT_DEPENDENCY', nonRetryable: false });
    expect(detailsOf(failure)).toMatchObject({ certainty: 'not_executed', reason: 'connection_refused' });
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

it('never resends after the message was handed over but not recorded: the retry reports UNKNOWN_OUTCOME', async () => {
  const flaky = notifications({ store: failingMarkSentOnce(store) });
  const input = await notice('record-lost:v1');
  const messageId = messageIdForKey(input.key);
  await expect(failureOf(run(flaky.sendRefundNotice, input))).resolves.toMatchObject({
    type: 'TRANSIENT_DEPENDENCY',
    message: expect.stringMatching(/disk I\/O error/),
  });
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });

  // While the hand-over could still be running somewhere, a retry waits for it rather than calling it lost.
  const early = await failureOf(run(flaky.sendRefundNotice, input));
  expect(early).toMatchObject({ type: 'STATE_CONFLICT', nonRetryable: false });
  expect(detailsOf(early)).toMatchObject({ reason: 'send_in_progress', certainty: 'may_have_executed' });
  await handOverExpired();
  const failure = await failureOf(run(flaky.sendRefundNotice, input));
  expect(failure).toMatchObject({ type: 'UNKNOWN_OUTCOME', nonRetryable: true });
  expect(failure.message).toContain(`a previous attempt handed the message ${messageId}`);
  expect(failure.message).toMatch(/check the mailbox for that Message-ID before any resend/);
  expect(detailsOf(failure)).toMatchObject({
    certainty: 'may_have_executed',
    reason: 'previous_attempt_unconfirmed',
    provider: { key: input.key, messageId },
  });
  await expect(delivered(messageId)).resolves.toHaveLength(1);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending', attempts: 3 });
});

it('resends a hand-over a person approved once: a retry of that resend whose record was lost does not send again', async () => {
  const input = await notice('approved-resend:v1');
  const messageId = messageIdForKey(input.key);
  // The first hand-over's record is lost: its outcome is unknown, and a person looks.
  await expect(
    failureOf(run(notifications({ store: failingMarkSentOnce(store) }).sendRefundNotice, input)),
  ).resolves.toBeDefined();
  await handOverExpired();
  const approved = { ...input, resendApprovedAt: new Date().toISOString() };

  // The approved resend goes out, and its own record is lost too.
  await expect(
    failureOf(run(notifications({ store: failingMarkSentOnce(store) }).sendRefundNotice, approved)),
  ).resolves.toMatchObject({ type: 'TRANSIENT_DEPENDENCY' });
  await expect(delivered(messageId)).resolves.toHaveLength(2);
  // Temporal retries the same activity with the same input: the approval is spent, so it waits, then reports the unknown outcome.
  await expect(failureOf(run(activities.sendRefundNotice, approved))).resolves.toMatchObject({
    type: 'STATE_CONFLICT',
  });
  await handOverExpired();
  await expect(failureOf(run(activities.sendRefundNotice, approved))).resolves.toMatchObject({
    type: 'UNKNOWN_OUTCOME',
  });
  await expect(delivered(messageId)).resolves.toHaveLength(2);
});

it('classifies a store failure right after the server’s 250 as delivered, not as “not executed”', async () => {
  const file = path.join(dir, 'locked-after-250.db');
  const locking = await openStore(`sqlite:${file}`, { busyTimeoutMs: 200 });
  const locker = new Database(file);
  try {
    await locking.seedOrder({
      id: 'ord_locked',
      paymentIntentId: 'pi_locked',
      customerEmail: 'dana@example.test',
      currency: 'usd',
      amount: 5000,
    });
    const input: RefundNoticeInput = {
      key: 'locked-after-250:v1',
      operationId: 'refund:test:ord_locked:v1',
      orderId: 'ord_locked',
      amount: 1250,
      currency: 'usd',
      refundId: 're_1',
    };
    // The message is in; before the server answers 250, another connection takes the store's write lock and holds it past busy_timeout.
    server.setFaults((stage) => {
      if (stage === 'data') {
        locker.exec('BEGIN IMMEDIATE');
        setTimeout(() => locker.exec('COMMIT'), 1500);
      }
      return undefined;
    });
    const patient = createNotificationActivities({
      mail: transport,
      store: locking,
      mailFrom: 'refunds@durable-refunds.test',
      attempt: createAttemptRunner({ policy: DEFAULT_POLICY, log: locking.operations }),
      policy: DEFAULT_POLICY,
      maxSendMs: 10_000,
    });
    const failure = await failureOf(run(patient.sendRefundNotice, input));
    server.setFaults(undefined);
    expect(detailsOf(failure)).toMatchObject({
      certainty: 'completed',
      reason: 'delivery_not_recorded',
      provider: { providerResponse: expect.stringMatching(/^250 /) },
    });
    expect(detailsOf(failure).certainty).not.toBe('not_executed');
    await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(1);
  } finally {
    server.setFaults(undefined);
    await new Promise((r) => setTimeout(r, 1600));
    locker.close();
    await locking.close();
  }
});

it('resends, on approval, only the hand-over the person judged, named by its stamp in the failure they saw', async () => {
  const input = await notice('judged-resend:v1');
  const messageId = messageIdForKey(input.key);
  await expect(
    failureOf(run(notifications({ store: failingMarkSentOnce(store) }).sendRefundNotice, input)),
  ).resolves.toBeDefined();
  await handOverExpired();
  const unknown = await failureOf(run(activities.sendRefundNotice, input));
  const judged = detailsOf(unknown).provider.sendingSince;
  expect(judged).toBe((await store.getNotification(input.key))!.sendingSince);

  // An approval of another hand-over covers not this one, however late the approver's clock put it.
  const other = {
    ...input,
    resendApprovedAt: new Date(Date.now() + 3600_000).toISOString(),
    approvedHandOver: '2000-01-01T00:00:00.000Z',
  };
  await expect(failureOf(run(activities.sendRefundNotice, other))).resolves.toMatchObject({ type: 'UNKNOWN_OUTCOME' });
  await expect(delivered(messageId)).resolves.toHaveLength(1);

  const approved = { ...input, resendApprovedAt: new Date().toISOString(), approvedHandOver: judged as string };
  await expect(run(activities.sendRefundNotice, approved)).resolves.toMatchObject({ alreadySent: false });
  await expect(delivered(messageId)).resolves.toHaveLength(2);
});

it('resends an unknown send with the same Message-ID when the policy says so', async () => {
  const resend = parsePolicy({
    ...DEFAULT_POLICY,
    rules: [
      ...DEFAULT_POLICY.rules,
      {
        code: 'UNKNOWN_OUTCOME',
        boundary: 'smtp',
        action: 'retry',
        owner: 'dependency_adapter',
        maxAttempts: 3,
        backoff: { initialMs: 100, coefficient: 2, maxMs: 1000 },
      },
    ],
  });
  const input = await notice('resend-unknown:v1');
  await expect(
    failureOf(run(notifications({ store: failingMarkSentOnce(store), policy: resend }).sendRefundNotice, input)),
  ).resolves.toBeDefined();
  await handOverExpired();
  const receipt = await run(notifications({ policy: resend }).sendRefundNotice, input);
  expect(receipt).toMatchObject({ alreadySent: false, messageId: messageIdForKey(input.key) });
  // Two copies under one Message-ID: the receiver may fold them; that is the trade this policy row makes.
  expect((await delivered(receipt.messageId)).map((m) => m.messageId)).toEqual([receipt.messageId, receipt.messageId]);
});

it('reports UNKNOWN_OUTCOME when the reply to the message never comes, and the retry does not resend', async () => {
  const impatient = nodemailer.createTransport({ url: server.smtpUrl, pool: false, socketTimeout: 100 });
  const stalled = notifications({ transport: impatient });
  const input = await notice('reply-lost:v1');
  server.setFaults((stage) => (stage === 'data' ? { code: 451, message: '4.3.0 too late', delayMs: 2000 } : undefined));
  try {
    const failure = await failureOf(run(stalled.sendRefundNotice, input));
    expect(failure).toMatchObject({ type: 'UNKNOWN_OUTCOME', nonRetryable: true });
    expect(detailsOf(failure)).toMatchObject({
      reason: 'connection_lost_after_handover',
      provider: { key: input.key, code: 'ETIMEDOUT' },
    });
    server.setFaults(undefined);
    await handOverExpired();
    await expect(failureOf(run(activities.sendRefundNotice, input))).resolves.toMatchObject({
      type: 'UNKNOWN_OUTCOME',
    });
    await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });
  } finally {
    server.setFaults(undefined);
    impatient.close();
  }
});

describe('a hand-over judged by the bound its sender recorded', () => {
  it('is in progress for an attempt whose own deadline is shorter, while the longer one is still being answered', async () => {
    const input = await notice('sender-bound:v1');
    const messageId = messageIdForKey(input.key);
    await mailFault({ kind: 'accept_late', stage: 'data', delayMs: 4000, match: { messageId } });
    // The sender may talk for 6 s; the judge's own deadline is 1 s, so its own arithmetic would call it over after 2.
    const sending = run(notifications({ maxSendMs: 6000 }).sendRefundNotice, input);
    for (let i = 0; i < 100 && (await store.getNotification(input.key))?.status !== 'sending'; i++)
      await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 2500));
    const judged = await failureOf(run(activities.sendRefundNotice, input));
    expect(detailsOf(judged)).toMatchObject({ reason: 'send_in_progress' });
    await expect(sending).resolves.toMatchObject({ alreadySent: false });
    await expect(run(activities.sendRefundNotice, input)).resolves.toMatchObject({ alreadySent: true });
    await expect(delivered(messageId)).resolves.toHaveLength(1);
  });

  it('records a bound that ends before a 1.0 worker of the same policy judges the hand-over ended (stamp + start-to-close - 4 s)', async () => {
    const input = await notice('bound-for-1.0:v1');
    let bound: number | undefined;
    const watching = new Proxy(store, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (prop !== 'claimHandOver') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: Parameters<OrderStore['claimHandOver']>) => {
          const claimed = await target.claimHandOver(...args);
          const held = await target.getNotification(input.key);
          bound = Date.parse(held!.sendingUntil!) - Date.parse(held!.sendingSince!);
          return claimed;
        };
      },
    });
    const attempt = activityEnv({ startToCloseTimeoutMs: 30_000 });
    await attempt.run(notifications({ store: watching, maxSendMs: 60_000 }).sendRefundNotice, input);
    expect(bound).toBeGreaterThan(20_000);
    expect(bound).toBeLessThanOrEqual(30_000 - 4000);
  });

  it('is not begun by a worker stalled after its claim past what its attempt leaves: nothing is sent, the entry is free again', async () => {
    const input = await notice('stalled-after-claim:v1');
    // The claim returns, then the worker stalls: 2.5 s of an attempt of 3 s.
    const stalling = new Proxy(store, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (prop !== 'claimHandOver') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: Parameters<OrderStore['claimHandOver']>) => {
          const claimed = await target.claimHandOver(...args);
          await new Promise((r) => setTimeout(r, 2500));
          return claimed;
        };
      },
    });
    const short = activityEnv({ startToCloseTimeoutMs: 3000 });
    const failure = await failureOf(
      short.run(notifications({ store: stalling, maxSendMs: 10_000 }).sendRefundNotice, input),
    );
    expect(detailsOf(failure)).toMatchObject({ certainty: 'not_executed', reason: 'attempt_time_spent' });
    await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
    await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'pending' });
  });
});

it('lets only one of two concurrent attempts send', async () => {
  const input = await notice('concurrent:v1');
  const results = await Promise.allSettled([
    run(activities.sendRefundNotice, input),
    run(activities.sendRefundNotice, input),
  ]);
  const sent = results.filter((r) => r.status === 'fulfilled' && !r.value.alreadySent);
  expect(sent).toHaveLength(1);
  for (const other of results.filter((r) => !sent.includes(r))) {
    if (other.status === 'fulfilled') expect(other.value.alreadySent).toBe(true);
    else expect(other.reason).toMatchObject({ type: 'STATE_CONFLICT', nonRetryable: false });
  }
  await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(1);
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sent', attempts: 2 });
});

it("settles a notice whose hand-over is unknown on a person's word, once, naming them, and sends nothing; a notice not handed over, or being handed over, is refused", async () => {
  const input = await notice('confirmed:v1');
  const entry = {
    key: input.key,
    orderId: input.orderId,
    kind: 'refund_notice' as const,
    recipient: 'dana@example.test',
    subject: 'Your refund',
    messageId: messageIdForKey(input.key),
  };
  const confirmation = {
    key: input.key,
    operationId: input.operationId,
    by: 'ops',
    reason: 'found it in the provider log',
  };

  // Claimed but never handed over: nobody can have found it delivered.
  await store.claimNotification(entry);
  const refused = await failureOf(run(activities.confirmNoticeDelivered, confirmation));
  expect(refused).toMatchObject({ type: 'PERMANENT_BUSINESS', nonRetryable: true });
  expect(detailsOf(refused)).toMatchObject({ certainty: 'not_executed', reason: 'no_unknown_handover' });
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'pending' });

  // Being handed over right now: a live send may still be refused (5xx) and released, so nobody can confirm it yet.
  await store.markNotificationSending(input.key, SEND_DEADLINE_MS + SEND_CLOCK_MARGIN_MS);
  const live = await failureOf(run(activities.confirmNoticeDelivered, confirmation));
  expect(live).toMatchObject({
    type: 'STATE_CONFLICT',
    nonRetryable: false,
    message: expect.stringMatching(/is being handed over right now/),
  });
  expect(detailsOf(live)).toMatchObject({ certainty: 'not_executed', reason: 'send_in_progress' });
  await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });
  await expect(store.operations.auditTrail(input.operationId)).resolves.toEqual([]);

  // Handed over, and its answer lost: no attempt is sending it any more.
  await handOverExpired();
  const receipt = await run(activities.confirmNoticeDelivered, confirmation);
  expect(receipt).toMatchObject({
    key: input.key,
    messageId: entry.messageId,
    recipient: 'd***@example.test',
    providerResponse: 'delivery confirmed by ops: found it in the provider log',
    alreadySent: true,
  });
  await expect(run(activities.confirmNoticeDelivered, confirmation)).resolves.toMatchObject({
    providerResponse: receipt.providerResponse,
  });
  await expect(store.getNotification(input.key)).resolves.toMatchObject({
    status: 'sent',
    providerResponse: receipt.providerResponse,
    sentAt: expect.any(String),
  });
  await expect(store.operations.auditTrail(input.operationId)).resolves.toEqual([
    expect.objectContaining({
      event: 'notification_sent',
      detail: expect.objectContaining({ key: input.key, confirmedBy: 'ops', reason: 'found it in the provider log' }),
    }),
  ]);
  await expect(delivered(entry.messageId)).resolves.toHaveLength(0);
});

it("never confirms on a person's word a hand-over taken over between its check and its record: an approved resend in flight stays the server's to settle", async () => {
  const input = await notice('confirm-vs-resend:v1');
  const messageId = messageIdForKey(input.key);
  // The first hand-over's record is lost: its outcome is unknown, and it has ended.
  await failureOf(run(notifications({ store: failingMarkSentOnce(store) }).sendRefundNotice, input));
  await handOverExpired();
  const judged = (await store.getNotification(input.key))!.sendingSince!;
  // Another run of the operation resends it, approved, and the relay is slow to take that resend.
  await mailFault({ kind: 'accept_late', stage: 'data', delayMs: 1500, match: { messageId } });
  const approved = { ...input, resendApprovedAt: new Date().toISOString(), approvedHandOver: judged };
  let resend: Promise<unknown> | undefined;
  // The confirmation reads the entry (the hand-over it judges ended); the resend takes it over before it records.
  const interleaved = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (prop !== 'getNotification' || resend) return typeof value === 'function' ? value.bind(target) : value;
      return async (key: string) => {
        const seen = await target.getNotification(key);
        resend = run(notifications({ maxSendMs: 5000 }).sendRefundNotice, approved);
        resend.catch(() => undefined);
        for (let i = 0; i < 200 && (await target.getNotification(key))?.sendingSince === judged; i++)
          await new Promise((r) => setTimeout(r, 10));
        return seen;
      };
    },
  });
  const confirmation = { key: input.key, operationId: input.operationId, by: 'ops', reason: 'found it in the log' };
  const confirmed = await run(notifications({ store: interleaved }).confirmNoticeDelivered, confirmation).then(
    (receipt) => ({ receipt }),
    (err: unknown) => ({ failure: err as ApplicationFailure }),
  );
  expect(confirmed).toMatchObject({ failure: { type: 'STATE_CONFLICT', nonRetryable: false } });
  await expect(resend).resolves.toMatchObject({ alreadySent: false });
  await expect(store.getNotification(input.key)).resolves.toMatchObject({
    status: 'sent',
    providerResponse: expect.stringMatching(/^250 /),
  });
  const trail = await store.operations.auditTrail(input.operationId);
  expect(trail.filter((e) => e.event === 'notification_sent').map((e) => e.detail)).toEqual([
    expect.not.objectContaining({ confirmedBy: expect.anything() }),
  ]);
  await expect(delivered(messageId)).resolves.toHaveLength(2);
});

describe.each(DIALECTS)('one clock for the outbox, on %s', (dialect) => {
  // Each case's attempt scheduled when it begins: a clock 30 s ahead must not eat the file's schedule-to-close.
  let run: ActivityEnv['run'];
  beforeEach(() => {
    ({ run } = activityEnv());
  });
  let shared: OrderStore;
  /** The deployment's own deadline: a hand-over younger than it (plus a second) may still be running. */
  const deadlineMs = 25_000;
  const worker = (policy: RecoveryPolicy = DEFAULT_POLICY) =>
    createNotificationActivities({
      mail: transport,
      store: shared,
      mailFrom: 'refunds@durable-refunds.test',
      attempt: createAttemptRunner({ policy, log: shared.operations }),
      policy,
      maxSendMs: deadlineMs,
    });
  const resendPolicy = parsePolicy({
    ...DEFAULT_POLICY,
    rules: [
      ...DEFAULT_POLICY.rules,
      {
        code: 'UNKNOWN_OUTCOME',
        boundary: 'smtp',
        action: 'retry',
        owner: 'dependency_adapter',
        maxAttempts: 3,
        backoff: { initialMs: 100, coefficient: 2, maxMs: 1000 },
      },
    ],
  });

  beforeAll(async () => {
    shared = await openStore(await freshDatabase(dialect, dir));
  });
  afterAll(() => shared.close());
  afterEach(() => jest.restoreAllMocks());

  /** A notice whose hand-over another host began just now (stamped in the store) and has not finished. */
  async function handOverOpenElsewhere(key: string): Promise<RefundNoticeInput> {
    const orderId = `ord_clock_${key}`;
    await shared.seedOrder({
      id: orderId,
      paymentIntentId: `pi_${orderId}`,
      customerEmail: 'dana@example.test',
      currency: 'usd',
      amount: 5000,
    });
    const input: RefundNoticeInput = {
      key,
      operationId: `refund:test:${orderId}:v1`,
      orderId,
      amount: 1250,
      currency: 'usd',
      refundId: 're_1',
    };
    const subject = `Your refund of ${formatAmount(1250, 'usd')} for order ${orderId}`;
    await shared.claimNotification({
      key,
      orderId,
      kind: 'refund_notice',
      recipient: 'dana@example.test',
      subject,
      messageId: messageIdForKey(key),
    });
    await expect(shared.markNotificationSending(key)).resolves.toBe(true);
    return input;
  }

  /** This worker's host clock runs 30 s ahead of the host that stamped the hand-over. */
  function clockAhead(ms = 30_000): void {
    const real = Date.now.bind(Date);
    jest.spyOn(Date, 'now').mockImplementation(() => real() + ms);
  }

  it('sees a hand-over begun 30 s ago by its own clock, but just now by the store’s, as in progress, and sends nothing', async () => {
    const input = await handOverOpenElsewhere(`skew-${dialect}:v1`);
    clockAhead();
    for (const policy of [DEFAULT_POLICY, resendPolicy]) {
      const failure = await failureOf(run(worker(policy).sendRefundNotice, input));
      expect(detailsOf(failure)).toMatchObject({ reason: 'send_in_progress', certainty: 'may_have_executed' });
      expect(failure).toMatchObject({ type: 'STATE_CONFLICT', nonRetryable: false });
    }
    await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
    await expect(shared.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });
  });

  it('never lets an approval cover a hand-over that began after it, whatever the approver’s clock said', async () => {
    const input = await handOverOpenElsewhere(`approval-${dialect}:v1`);
    // The person judged an earlier hand-over (named by its stamp); by the workflow's clock, they approved 30 s after this one began.
    const approved = {
      ...input,
      resendApprovedAt: new Date(Date.now() + 30_000).toISOString(),
      approvedHandOver: new Date(Date.now() - 60_000).toISOString(),
    };
    const failure = await failureOf(run(worker().sendRefundNotice, approved));
    expect(detailsOf(failure)).toMatchObject({ reason: 'send_in_progress' });
    await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
  });

  it('waits out a live hand-over for an approval that names none, however late it was given', async () => {
    const input = await handOverOpenElsewhere(`unnamed-${dialect}:v1`);
    // An approval that judged no hand-over (a run begun before stamps were named), given after this one began.
    const approved = { ...input, resendApprovedAt: new Date(Date.now() + 60_000).toISOString() };
    const failure = await failureOf(run(worker().sendRefundNotice, approved));
    expect(detailsOf(failure)).toMatchObject({ reason: 'send_in_progress' });
    await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
    await expect(shared.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });
  });
});
