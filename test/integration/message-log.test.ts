// An email whose hand-over is unknown, settled from the mail provider's message log (the SMTP server's mailbox API
// stands in for SES's or Postmark's): found, it was sent; proven absent, it is sent again with the same Message-ID;
// the log unreachable, it stays unknown for a person, as without a log. The cases that wait run side by side.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Transporter } from 'nodemailer';
import { createAttemptRunner } from '../../src/activities/attempt';
import { createMailTransport } from '../../src/activities/mail-transport';
import { httpMessageLog, type MessageLog } from '../../src/activities/message-log';
import { createNotificationActivities } from '../../src/activities/notifications';
import type { RefundNoticeInput } from '../../src/activities/refund-notice';
import { messageIdForKey } from '../../src/contract';
import { Breakers } from '../../src/reliability/circuit-breaker';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import { openStore, type OrderStore } from '../../src/store';
import { startMailServer, type MailServer, type StoredMessage } from '../../tools/src/servers/mail-server';
import { activityEnv, detailsOf, failureOf } from '../helpers/activity-env';

const CONSISTENCY_MS = 300;
const SHORT_SMTP = { startToCloseMs: 1000, scheduleToCloseMs: 60_000 };
const SEND_MS = 1000;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'message-log-'));
let server: MailServer;
let store: OrderStore;
let transport: Transporter;
let log: MessageLog;

beforeAll(async () => {
  server = await startMailServer({ dbPath: path.join(dir, 'mailbox.db'), faultApi: true });
  store = await openStore(`sqlite:${path.join(dir, 'orders.db')}`);
  transport = createMailTransport(server.smtpUrl);
  log = httpMessageLog({ url: server.apiUrl, consistencyMs: CONSISTENCY_MS });
});

afterAll(async () => {
  transport.close();
  await server.close();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function notifications(
  messageLog: MessageLog | null = log,
  over: { breakers?: Breakers; policy?: RecoveryPolicy } = {},
) {
  const policy = over.policy ?? DEFAULT_POLICY;
  return createNotificationActivities({
    mail: transport,
    store,
    mailFrom: 'refunds@durable-refunds.test',
    attempt: createAttemptRunner({ policy, log: store.operations, breakers: over.breakers }),
    policy,
    maxSendMs: SEND_MS,
    messageLog: messageLog ?? undefined,
  });
}

async function notice(name: string): Promise<RefundNoticeInput> {
  const orderId = `ord_log_${name}`;
  await store.seedOrder({
    id: orderId,
    paymentIntentId: `pi_${orderId}`,
    customerEmail: `${name}@example.test`,
    currency: 'usd',
    amount: 5000,
  });
  return {
    key: `${name}:v1`,
    operationId: `refund:test:${orderId}:v1`,
    orderId,
    amount: 1250,
    currency: 'usd',
    refundId: 're_1',
  };
}

async function delivered(messageId: string): Promise<StoredMessage[]> {
  const res = await fetch(`${server.apiUrl}/messages?message_id=${encodeURIComponent(messageId)}`);
  return ((await res.json()) as { messages: StoredMessage[] }).messages;
}

async function mailFault(fault: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${server.apiUrl}/_faults`, { method: 'POST', body: JSON.stringify(fault) });
  if (!res.ok) throw new Error(`arming ${JSON.stringify(fault)}: ${res.status} ${await res.text()}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A relay slower than the send's deadline: the attempt hangs up before its 250, and the relay keeps nothing. */
async function relayTooSlow(input: RefundNoticeInput): Promise<void> {
  await mailFault({
    kind: 'accept_late',
    stage: 'data',
    delayMs: 3000,
    match: { messageId: messageIdForKey(input.key) },
  });
}

it.concurrent(
  'a lost answer waits for the log, then settles from it: sent once, recorded as reconciled, no second email',
  async () => {
    const input = await notice('lost-answer');
    const messageId = messageIdForKey(input.key);
    await mailFault({ kind: 'drop_after_accept', match: { messageId } });
    const { run } = activityEnv();

    const waiting = await failureOf(run(notifications().sendRefundNotice, input));
    expect(waiting).toMatchObject({ type: 'STATE_CONFLICT', nonRetryable: false });
    const details = detailsOf(waiting);
    expect(details).toMatchObject({ reason: 'awaiting_message_log', certainty: 'may_have_executed' });
    expect(details.retryAfterMs).toBeGreaterThan(CONSISTENCY_MS);
    expect(details.retryAfterMs).toBeLessThanOrEqual(SEND_MS + 1000 + CONSISTENCY_MS);

    await sleep(details.retryAfterMs!);
    const receipt = await run(notifications().sendRefundNotice, input);
    expect(receipt).toMatchObject({ alreadySent: true, providerResponse: expect.stringMatching(/^reconciled: /) });
    await expect(delivered(messageId)).resolves.toHaveLength(1);
    await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sent' });
    const trail = await store.operations.auditTrail(input.operationId);
    expect(trail.filter((e) => e.event === 'notification_sent')).toHaveLength(1);
  },
);

it.concurrent(
  'a hand-over that never reached the server is sent again with the same Message-ID once the log proves it absent',
  async () => {
    const input = await notice('never-sent');
    const messageId = messageIdForKey(input.key);
    await relayTooSlow(input);
    const { run } = activityEnv();
    // A window wide enough that a loaded machine's delays never carry the early look past it.
    const slowLog = httpMessageLog({ url: server.apiUrl, consistencyMs: 3000 });

    const cut = await failureOf(run(notifications(slowLog).sendRefundNotice, input));
    expect(detailsOf(cut)).toMatchObject({ reason: 'awaiting_message_log' });
    // The sender's bound (its deadline + 1 s) has not passed: nothing is asked yet.
    const live = await failureOf(run(notifications(slowLog).sendRefundNotice, input));
    expect(detailsOf(live)).toMatchObject({ reason: 'send_in_progress' });
    // Its bound has passed, the log's window has not: a miss proves nothing yet.
    await sleep(1100);
    const early = await failureOf(run(notifications(slowLog).sendRefundNotice, input));
    expect(detailsOf(early)).toMatchObject({ reason: 'awaiting_message_log' });
    await expect(delivered(messageId)).resolves.toHaveLength(0);

    await sleep(detailsOf(early).retryAfterMs!);
    const receipt = await run(notifications(slowLog).sendRefundNotice, input);
    expect(receipt).toMatchObject({ alreadySent: false });
    const mailbox = await delivered(messageId);
    expect(mailbox).toHaveLength(1);
    expect(mailbox[0]!.messageId).toBe(messageId);
  },
);

it.concurrent(
  'a log that cannot be read is asked again, and the last attempt leaves the outcome unknown for a person: nothing sent',
  async () => {
    const input = await notice('log-down');
    await relayTooSlow(input);
    const down = httpMessageLog({ url: 'http://127.0.0.1:9', consistencyMs: CONSISTENCY_MS, timeoutMs: 500 });
    const cut = await failureOf(activityEnv().run(notifications(down).sendRefundNotice, input));
    await sleep(detailsOf(cut).retryAfterMs!);
    const again = await failureOf(activityEnv({ attempt: 2 }).run(notifications(down).sendRefundNotice, input));
    expect(again).toMatchObject({ type: 'STATE_CONFLICT', nonRetryable: false });
    expect(again.message).toMatch(/the message log could not be read/);
    const last = await failureOf(activityEnv({ attempt: 5 }).run(notifications(down).sendRefundNotice, input));
    expect(last).toMatchObject({ type: 'UNKNOWN_OUTCOME', nonRetryable: true });
    expect(detailsOf(last)).toMatchObject({ reason: 'awaiting_message_log' });
    await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
    await expect(store.getNotification(input.key)).resolves.toMatchObject({ status: 'sending' });
  },
);

it.concurrent('a hand-over stamped without its bound is never proven absent: a person checks', async () => {
  const input = await notice('unbounded');
  await store.claimNotification({
    key: input.key,
    orderId: input.orderId,
    kind: 'refund_notice',
    recipient: 'unbounded@example.test',
    subject: `Your refund of $12.50 for order ${input.orderId}`,
    messageId: messageIdForKey(input.key),
  });
  // Stamped as a worker from before bounds were recorded did; judged by a worker whose smtp attempts last 1 s, so
  // that by its arithmetic the hand-over ended 2 s after its stamp.
  expect(await store.markNotificationSending(input.key)).toBe(true);
  await sleep(2100);
  const policy = { ...DEFAULT_POLICY, timeouts: { ...DEFAULT_POLICY.timeouts, smtp: SHORT_SMTP } };
  const failure = await failureOf(activityEnv().run(notifications(log, { policy }).sendRefundNotice, input));
  expect(failure).toMatchObject({ type: 'UNKNOWN_OUTCOME' });
  expect(failure.message).toMatch(/stamped without its bound/);
  await expect(delivered(messageIdForKey(input.key))).resolves.toHaveLength(0);
});

it('counts a lost answer against the relay, as without a log: the circuit opens after five', async () => {
  const breakers = new Breakers(DEFAULT_POLICY.breaker);
  for (let i = 0; i < 5; i++) {
    const input = await notice(`breaker-${i}`);
    await mailFault({ kind: 'drop_after_accept', match: { messageId: messageIdForKey(input.key) } });
    const failure = await failureOf(activityEnv().run(notifications(log, { breakers }).sendRefundNotice, input));
    expect(detailsOf(failure)).toMatchObject({ reason: 'awaiting_message_log' });
  }
  expect(breakers.get('smtp:send').snapshot()).toMatchObject({ state: 'open' });
});

it('without a log, a lost answer is unknown at once, as before', async () => {
  const input = await notice('no-log');
  await mailFault({ kind: 'drop_after_accept', match: { messageId: messageIdForKey(input.key) } });
  const failure = await failureOf(activityEnv().run(notifications(null).sendRefundNotice, input));
  expect(failure).toMatchObject({ type: 'UNKNOWN_OUTCOME' });
  expect(detailsOf(failure)).toMatchObject({ reason: 'connection_lost_after_handover' });
});

it("an attempt with no retry left while it waits for the log ends unknown, as the policy's last word", async () => {
  const input = await notice('last-attempt');
  await mailFault({ kind: 'drop_after_accept', match: { messageId: messageIdForKey(input.key) } });
  const failure = await failureOf(activityEnv({ attempt: 5 }).run(notifications().sendRefundNotice, input));
  expect(failure).toMatchObject({ type: 'UNKNOWN_OUTCOME', nonRetryable: true });
  expect(detailsOf(failure)).toMatchObject({ reason: 'awaiting_message_log' });
});

it('reads a log that shows Message-IDs without their angle brackets, and never takes another message for ours', async () => {
  const shown = [
    { id: 7, messageId: 'ours@durable-refunds.local', receivedAt: '2026-12-05T08:00:00.000Z' },
    { id: 8, messageId: '<other@durable-refunds.local>', receivedAt: '2026-12-05T08:00:01.000Z' },
  ];
  const asked: (string | undefined)[] = [];
  const fake = http.createServer((req, res) => {
    asked.push(req.headers.authorization);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ messages: shown }));
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
    const fakeLog = httpMessageLog({ url, consistencyMs: 0, token: 'secret' });
    await expect(fakeLog.find('<ours@durable-refunds.local>')).resolves.toEqual([
      { id: '7', acceptedAt: '2026-12-05T08:00:00.000Z' },
    ]);
    await expect(fakeLog.find('<third@durable-refunds.local>')).resolves.toEqual([]);
    expect(asked).toEqual(['Bearer secret', 'Bearer secret']);
  } finally {
    fake.close();
  }
});
