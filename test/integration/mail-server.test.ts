import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import nodemailer, { type NodemailerError, type Transporter } from 'nodemailer';
import { createMailTransport } from '../../src/activities/mail-transport';
import { startMailServer, type MailServer, type StoredMessage } from '../../tools/src/servers/mail-server';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mail-server-'));
const dbPath = path.join(dir, 'mailbox.db');
let server: MailServer;
let transport: Transporter;

async function messages(query = ''): Promise<StoredMessage[]> {
  const res = await fetch(`${server.apiUrl}/messages${query}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { messages: StoredMessage[] }).messages;
}

function transportFor(smtpUrl: string): Transporter {
  return nodemailer.createTransport({
    url: smtpUrl,
    connectionTimeout: 5000,
    greetingTimeout: 5000,
    socketTimeout: 5000,
  });
}

beforeAll(async () => {
  server = await startMailServer({ smtpPort: 0, apiPort: 0, dbPath });
  transport = transportFor(server.smtpUrl);
});

afterAll(async () => {
  transport.close();
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('stores what it receives and finds it by Message-ID and recipient', async () => {
  const messageId = '<mail-test-1@durable-refunds.local>';
  const info = await transport.sendMail({
    from: 'refunds@durable-refunds.test',
    to: 'alice@example.test',
    subject: 'Votre remboursement de 12,50 €',
    text: 'hello',
    messageId,
  });
  expect(info.response).toMatch(/^250 OK: stored as message \d+/);

  const found = await messages(`?message_id=${encodeURIComponent(messageId)}`);
  expect(found).toEqual([
    {
      id: expect.any(Number),
      messageId,
      from: 'refunds@durable-refunds.test',
      to: ['alice@example.test'],
      subject: 'Votre remboursement de 12,50 €',
      receivedAt: expect.any(String),
    },
  ]);
  await expect(messages('?to=ALICE@example.test')).resolves.toHaveLength(1);
  await expect(messages('?to=bob@example.test')).resolves.toHaveLength(0);
  await expect(messages('?message_id=mail-test-1@durable-refunds.local')).resolves.toHaveLength(0);

  const raw = await fetch(`${server.apiUrl}/messages/${found[0].id}/raw`);
  expect(raw.headers.get('content-type')).toBe('message/rfc822');
  expect(await raw.text()).toContain(`Message-ID: ${messageId}`);
  expect((await fetch(`${server.apiUrl}/messages/999999/raw`)).status).toBe(404);
  expect((await fetch(`${server.apiUrl}/messages`, { method: 'POST' })).status).toBe(405);
});

it('counts every delivery, so a duplicate send shows up as two messages', async () => {
  const messageId = '<mail-test-dup@durable-refunds.local>';
  for (let i = 0; i < 2; i++) {
    await transport.sendMail({
      from: 'refunds@durable-refunds.test',
      to: 'dup@example.test',
      subject: 'dup',
      text: 'x',
      messageId,
    });
  }
  await expect(messages(`?message_id=${encodeURIComponent(messageId)}`)).resolves.toHaveLength(2);
});

it('refuses reject- recipients with a permanent 550 at RCPT TO', async () => {
  const sent = transport.sendMail({
    from: 'refunds@durable-refunds.test',
    to: 'reject-carol@example.test',
    subject: 'no',
    text: 'x',
  });
  await expect(sent).rejects.toMatchObject({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO' });
  const err = (await sent.catch((e: unknown) => e)) as NodemailerError;
  expect(err.response).toMatch(/^550 5\.1\.1 <reject-carol@example\.test>: recipient rejected/);
  await expect(messages('?to=reject-carol@example.test')).resolves.toHaveLength(0);
});

it('answers with injected faults, including a delayed 421', async () => {
  server.setFaults((stage) => (stage === 'data' ? { code: 451, message: '4.3.0 try again' } : undefined));
  await expect(
    transport.sendMail({ from: 'a@example.test', to: 'faulty@example.test', subject: 's', text: 'x' }),
  ).rejects.toMatchObject({
    responseCode: 451,
  });
  server.setFaults((stage) => (stage === 'mail' ? { code: 421, message: '4.7.0 slow down', delayMs: 200 } : undefined));
  const started = Date.now();
  await expect(
    transport.sendMail({ from: 'a@example.test', to: 'faulty@example.test', subject: 's', text: 'x' }),
  ).rejects.toMatchObject({
    responseCode: 421,
  });
  expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  server.setFaults(undefined);
  await expect(messages('?to=faulty@example.test')).resolves.toHaveLength(0);
});

it('keeps messages across a restart on the same file', async () => {
  const before = await messages();
  expect(before.length).toBeGreaterThanOrEqual(3);
  transport.close();
  await server.close();

  server = await startMailServer({ dbPath });
  transport = transportFor(server.smtpUrl);
  await expect(messages()).resolves.toEqual(before);
  await transport.sendMail({ from: 'a@example.test', to: 'after@example.test', subject: 'after', text: 'x' });
  await expect(messages()).resolves.toHaveLength(before.length + 1);
});

it('answers 400 to an unparseable request URL and keeps serving', async () => {
  const reply = await new Promise<string>((resolve, reject) => {
    let text = '';
    // fetch would normalise the URL; a raw socket sends it as a broken client would.
    const socket = net.connect(server.apiPort, '127.0.0.1', () =>
      socket.write('GET //a:b HTTP/1.0\r\nHost: localhost\r\n\r\n'),
    );
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
  expect(reply).toMatch(/^HTTP\/1\.[01] 400 /);
  expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'invalid request URL: //a:b' });
  await expect(messages()).resolves.toEqual(expect.any(Array));
});

describe('the fault API', () => {
  const post = (base: string, body: unknown) =>
    fetch(`${base}/_faults`, { method: 'POST', body: JSON.stringify(body) });

  it('is off unless the server was started with it', async () => {
    const res = await post(server.apiUrl, { kind: 'reply' });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: expect.stringMatching(/fault injection is off/) });
  });

  it('arms scoped replies and lost acceptances, counts them down, and refuses a malformed fault', async () => {
    const faulty = await startMailServer({
      smtpPort: 0,
      apiPort: 0,
      dbPath: path.join(dir, 'faulty.db'),
      faultApi: true,
    });
    const client = transportFor(faulty.smtpUrl);
    const send = (to: string) =>
      client.sendMail({
        from: 'a@example.test',
        to,
        subject: 's',
        text: 'x',
        messageId: `<${to}.${Date.now()}@durable-refunds.local>`,
      });
    try {
      const bad = await post(faulty.apiUrl, { kind: 'reply', code: 250 });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ error: expect.stringMatching(/code/) });

      expect(
        (
          await post(faulty.apiUrl, {
            kind: 'reply',
            stage: 'rcpt',
            code: 450,
            message: '4.7.0 rate limited, retry after 2s',
            match: { recipient: 'limited@example.test' },
          })
        ).status,
      ).toBe(200);
      // Another recipient is not touched; the fault fires once for its own.
      await expect(send('other@example.test')).resolves.toBeDefined();
      await expect(send('limited@example.test')).rejects.toMatchObject({
        responseCode: 450,
        response: expect.stringMatching(/retry after 2s/),
      });
      await expect(send('limited@example.test')).resolves.toBeDefined();

      await post(faulty.apiUrl, { kind: 'drop_after_accept', match: { recipient: 'lost@example.test' } });
      const lost = (await send('lost@example.test').catch((e: unknown) => e)) as NodemailerError;
      expect(lost).toBeInstanceOf(Error);
      expect(lost.responseCode).toBeUndefined();
      // The client never heard the 250, but the message is in the mailbox.
      const res = await fetch(`${faulty.apiUrl}/messages?to=lost@example.test`);
      expect(((await res.json()) as { messages: StoredMessage[] }).messages).toHaveLength(1);

      const listed = (await (await fetch(`${faulty.apiUrl}/_faults`)).json()) as {
        faults: { kind: string; remaining: number; hits: number }[];
      };
      expect(listed.faults.map((f) => [f.kind, f.remaining, f.hits])).toEqual([
        ['reply', 0, 1],
        ['drop_after_accept', 0, 1],
      ]);
      expect(await (await fetch(`${faulty.apiUrl}/_faults`, { method: 'DELETE' })).json()).toEqual({ cleared: 2 });

      // Spread through traffic: every second message for the recipient, twice.
      await post(faulty.apiUrl, {
        kind: 'reply',
        stage: 'rcpt',
        code: 451,
        every: 2,
        count: 2,
        match: { recipient: 'spread@example.test' },
      });
      const outcomes = [];
      for (let i = 0; i < 6; i++)
        outcomes.push(
          await send('spread@example.test').then(
            () => 250,
            (e: NodemailerError) => e.responseCode,
          ),
        );
      expect(outcomes).toEqual([250, 451, 250, 451, 250, 250]);
    } finally {
      client.close();
      await faulty.close();
    }
  });

  it('answers a message late: taken with its 250 for a client that waits, not at all for one that hung up first', async () => {
    const faulty = await startMailServer({
      smtpPort: 0,
      apiPort: 0,
      dbPath: path.join(dir, 'late.db'),
      faultApi: true,
    });
    const client = transportFor(faulty.smtpUrl);
    const send = (to: string, signal?: AbortSignal) =>
      client.sendMail({ from: 'a@example.test', to, subject: 's', text: 'x', signal });
    const stored = async (to: string) =>
      ((await (await fetch(`${faulty.apiUrl}/messages?to=${to}`)).json()) as { messages: StoredMessage[] }).messages;
    try {
      const bad = await post(faulty.apiUrl, { kind: 'accept_late' });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ error: expect.stringMatching(/delayMs/) });

      await post(faulty.apiUrl, { kind: 'accept_late', delayMs: 600, match: { recipient: 'patient@example.test' } });
      const started = Date.now();
      await expect(send('patient@example.test')).resolves.toMatchObject({ response: expect.stringMatching(/^250 /) });
      expect(Date.now() - started).toBeGreaterThanOrEqual(600);
      expect(await stored('patient@example.test')).toHaveLength(1);

      await post(faulty.apiUrl, { kind: 'accept_late', delayMs: 800, match: { recipient: 'gone@example.test' } });
      await expect(send('gone@example.test', AbortSignal.timeout(300))).rejects.toMatchObject({ code: 'EABORT' });
      await new Promise((r) => setTimeout(r, 800));
      expect(await stored('gone@example.test')).toHaveLength(0);
    } finally {
      client.close();
      await faulty.close();
    }
  });
});

describe('the transport the worker builds from its settings', () => {
  const send = (t: Transporter, to: string) =>
    t.sendMail({ from: 'refunds@durable-refunds.test', to, subject: 'tls', text: 'x', messageId: `<${to}>` });

  it('sends in the clear to the local server when TLS is off', async () => {
    const plain = createMailTransport(server.smtpUrl, { tls: 'off', rejectUnauthorized: true });
    await send(plain, 'plain@example.test');
    plain.close();
    expect(await messages('?to=plain@example.test')).toHaveLength(1);
  });

  it('with STARTTLS required, refuses a server that does not offer it, before any message is handed over', async () => {
    const strict = createMailTransport(server.smtpUrl, {
      tls: 'starttls',
      rejectUnauthorized: true,
      auth: { user: 'relay', pass: 'secret' },
    });
    await expect(send(strict, 'strict@example.test')).rejects.toThrow(/STARTTLS/);
    strict.close();
    expect(await messages('?to=strict@example.test')).toHaveLength(0);
  });
});
