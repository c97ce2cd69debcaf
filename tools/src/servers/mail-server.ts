// A local SMTP server that keeps every message it accepts in SQLite, plus a small read-only
// HTTP API over that mailbox, so tests and the demo can count what a customer really received.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import { SMTPServer, type SMTPServerError, type SMTPServerSession } from 'smtp-server';
import { createMailFaults, mailFaultSchema, type MailFaults } from './mail-faults';

export type SmtpStage = 'connect' | 'mail' | 'rcpt' | 'data';

/** A reply the server gives instead of accepting the command, e.g. `{ code: 421, message: 'slow down', delayMs: 2000 }`. */
export interface SmtpFault {
  code: number;
  message: string;
  delayMs?: number;
}

/** Decides, per stage, whether to answer with a fault. `address` is the client's IP, the sender or the recipient; absent for DATA. */
export type FaultInjector = (stage: SmtpStage, address: string | undefined) => SmtpFault | undefined;

export interface MailServerOptions {
  smtpPort?: number;
  apiPort?: number;
  host?: string;
  dbPath: string;
  faults?: FaultInjector;
  /** Enables the fault API (POST /_faults on the mailbox port), on loopback only. Off by default. */
  faultApi?: boolean;
}

export interface MailServer {
  smtpPort: number;
  apiPort: number;
  smtpUrl: string;
  apiUrl: string;
  /** Replaces the fault injector (undefined: only the built-in reject- rule applies). */
  setFaults(faults: FaultInjector | undefined): void;
  close(): Promise<void>;
}

export interface StoredMessage {
  id: number;
  messageId: string | null;
  from: string;
  to: string[];
  subject: string | null;
  receivedAt: string;
}

const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id TEXT,
  mail_from TEXT NOT NULL,
  rcpt_to TEXT NOT NULL,
  subject TEXT,
  received_at TEXT NOT NULL,
  raw BLOB NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS messages_message_id ON messages(message_id);
`;

interface MessageRow {
  id: number;
  message_id: string | null;
  mail_from: string;
  rcpt_to: string;
  subject: string | null;
  received_at: string;
}

/** A permanent 550 for recipients whose local part starts with "reject-", so tests can exercise a hard bounce. */
export const rejectPrefixRule: FaultInjector = (stage, address) =>
  stage === 'rcpt' && address?.toLowerCase().startsWith('reject-')
    ? { code: 550, message: `5.1.1 <${address}>: recipient rejected` }
    : undefined;

export async function startMailServer(opts: MailServerOptions): Promise<MailServer> {
  const host = opts.host ?? '127.0.0.1';
  const db = new Database(opts.dbPath);
  db.pragma('journal_mode = WAL');
  db.exec(SCHEMA);
  const insert = db.prepare(
    'INSERT INTO messages (message_id, mail_from, rcpt_to, subject, received_at, raw) VALUES (?, ?, ?, ?, ?, ?)',
  );
  let faults = opts.faults;
  const armed = opts.faultApi ? createMailFaults() : undefined;
  const delayed = new Set<{ timer: NodeJS.Timeout; fire: () => void }>();
  const recipientsOf = (session: SMTPServerSession) => session.envelope.rcptTo.map((r) => r.address);

  const decide = (
    stage: SmtpStage,
    address: string | undefined,
    callback: (err?: Error | null) => void,
    recipients: string[] = [],
    messageId?: string,
  ): void => {
    const fault =
      rejectPrefixRule(stage, address) ?? faults?.(stage, address) ?? armed?.reply(stage, recipients, messageId);
    if (!fault) return callback();
    const err: SMTPServerError = new Error(fault.message);
    err.responseCode = fault.code;
    if (!fault.delayMs) return callback(err);
    hold(fault.delayMs, () => callback(err));
  };
  /** Runs `then` after `ms`, or at once when the server closes. */
  const hold = (ms: number, then: () => void): void => {
    const fire = (): void => {
      delayed.delete(pending);
      then();
    };
    const pending = { timer: setTimeout(fire, ms), fire };
    delayed.add(pending);
  };

  const smtp = new SMTPServer({
    name: 'mailbox.durable-refunds.local',
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    disableReverseLookup: true,
    logger: false,
    size: MAX_MESSAGE_BYTES,
    rejectOversized: true,
    // Non-pooled clients say QUIT after each message; do not hold a shutdown for 30 s on a stuck one.
    closeTimeout: 1000,
    onConnect: (session, callback) => decide('connect', session.remoteAddress, callback),
    onMailFrom: (address, _session, callback) => decide('mail', address.address, callback),
    onRcptTo: (address, session, callback) =>
      decide('rcpt', address.address, callback, [...recipientsOf(session), address.address]),
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (stream.sizeExceeded) return callback();
        const raw = Buffer.concat(chunks);
        const headers = parseHeaders(raw);
        const recipients = recipientsOf(session);
        decide(
          'data',
          undefined,
          (fault) => {
            if (fault) return callback(fault);
            const lateMs = armed?.acceptLate(recipients, headers.get('message-id'));
            if (lateMs !== undefined) {
              // Taken only if the client is still there to hear the 250 (its socket is gone once it hung up).
              const socket = connectionOf(session);
              return hold(lateMs, () => (socket && !socket.destroyed ? store() : callback(new Error('client gone'))));
            }
            store();
          },
          recipients,
          headers.get('message-id'),
        );
        function store(): void {
          try {
            const envelope = session.envelope;
            const result = insert.run(
              headers.get('message-id') ?? null,
              envelope.mailFrom ? envelope.mailFrom.address : '',
              JSON.stringify(envelope.rcptTo.map((r) => r.address)),
              headers.has('subject') ? decodeEncodedWords(headers.get('subject') ?? '') : null,
              new Date().toISOString(),
              raw,
            );
            if (armed?.dropAfterAccept(recipients, headers.get('message-id'))) {
              // Stored, and the 250 never sent: the client cannot tell whether we took it.
              connectionOf(session)?.destroy();
              return;
            }
            callback(null, `OK: stored as message ${result.lastInsertRowid}`);
          } catch (err) {
            const failure: SMTPServerError = new Error(
              `4.3.0 mailbox could not store the message: ${(err as Error).message}`,
            );
            failure.responseCode = 451;
            callback(failure);
          }
        }
      });
    },
  });
  /** The socket of the SMTP connection a session belongs to (smtp-server keeps it on the connection object). */
  const connectionOf = (session: SMTPServerSession): net.Socket | undefined => {
    const connections = (smtp as unknown as { connections: Set<{ session: SMTPServerSession; _socket: net.Socket }> })
      .connections;
    return [...connections].find((c) => c.session === session)?._socket;
  };

  // Clients that reset mid-session surface here; without a listener the EventEmitter would throw and kill the process.
  smtp.on('error', () => undefined);
  const api = http.createServer((req, res) => {
    // Last line of defence: an exception here would take the whole servers process down.
    try {
      if (req.url?.startsWith('/_faults')) {
        handleFaultApi(armed, req, res).catch((err: unknown) => {
          if (!res.headersSent) send(res, 500, { error: (err as Error).message });
        });
        return;
      }
      handleApi(db, req, res);
    } catch (err) {
      console.error(`[mail-server] ${req.method} ${req.url} could not be answered`, err);
      res.destroy();
    }
  });

  try {
    await listen(smtp.server, opts.smtpPort ?? 0, host);
    await listen(api, opts.apiPort ?? 0, host);
  } catch (err) {
    smtp.server.close();
    api.close();
    db.close();
    throw err;
  }

  const smtpPort = (smtp.server.address() as AddressInfo).port;
  const apiPort = (api.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    smtpPort,
    apiPort,
    smtpUrl: `smtp://${host}:${smtpPort}`,
    apiUrl: `http://${host}:${apiPort}`,
    setFaults(next) {
      faults = next;
    },
    close() {
      closing ??= (async () => {
        for (const entry of [...delayed]) {
          clearTimeout(entry.timer);
          entry.fire();
        }
        await Promise.all([
          new Promise<void>((resolve) => smtp.close(() => resolve())),
          new Promise<void>((resolve) => {
            api.close(() => resolve());
            api.closeAllConnections();
          }),
        ]);
        db.close();
      })();
      return closing;
    },
  };
}

function listen(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The fault API: GET lists, POST arms (JSON), DELETE clears (all, or /_faults/<id>). */
async function handleFaultApi(
  faults: MailFaults | undefined,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  if (!faults)
    return send(res, 404, { error: 'fault injection is off; start the server with it enabled (FAULT_INJECTION=on)' });
  const address = req.socket.remoteAddress;
  if (address !== '127.0.0.1' && address !== '::1' && address !== '::ffff:127.0.0.1')
    return send(res, 403, { error: 'the fault API answers only on loopback' });
  const id = /^\/_faults\/([A-Za-z0-9_]+)$/.exec(req.url ?? '')?.[1];
  if (req.method === 'GET') return send(res, 200, { faults: faults.list() });
  if (req.method === 'DELETE') return send(res, 200, { cleared: faults.clear(id) });
  if (req.method !== 'POST' || id !== undefined)
    return send(res, 405, { error: `${req.method} is not allowed on ${req.url}` });
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return send(res, 400, {
      error:
        'the body must be a JSON fault, e.g. {"kind":"reply","stage":"rcpt","code":450,"message":"4.7.0 rate limited, retry after 2s"}',
    });
  }
  const parsed = mailFaultSchema.safeParse(body);
  if (!parsed.success) {
    return send(res, 400, {
      error: `invalid fault: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(fault)'}: ${i.message}`).join('; ')}`,
    });
  }
  send(res, 200, { fault: faults.arm(parsed.data) });
}

function handleApi(db: Database.Database, req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.method !== 'GET') return send(res, 405, { error: 'the mailbox API is read-only' });
  let url: URL;
  try {
    url = new URL(req.url ?? '/', 'http://mailbox');
  } catch {
    return send(res, 400, { error: `invalid request URL: ${req.url}` });
  }
  try {
    if (url.pathname === '/messages') return send(res, 200, { messages: listMessages(db, url.searchParams) });
    const raw = /^\/messages\/(\d+)\/raw$/.exec(url.pathname);
    if (raw) {
      const row = db.prepare<[number], { raw: Buffer }>('SELECT raw FROM messages WHERE id = ?').get(Number(raw[1]));
      if (!row) return send(res, 404, { error: `no message ${raw[1]}` });
      res.writeHead(200, { 'content-type': 'message/rfc822' }).end(row.raw);
      return;
    }
    send(res, 404, {
      error: 'try GET /messages, /messages?message_id=<id@host>, /messages?to=<address> or /messages/:id/raw',
    });
  } catch (err) {
    if (!res.headersSent) send(res, 500, { error: (err as Error).message });
  }
}

function listMessages(db: Database.Database, params: URLSearchParams): StoredMessage[] {
  const where: string[] = [];
  const values: string[] = [];
  const messageId = params.get('message_id');
  if (messageId !== null) {
    where.push('message_id = ?');
    values.push(messageId);
  }
  const to = params.get('to');
  if (to !== null) {
    where.push('EXISTS (SELECT 1 FROM json_each(rcpt_to) WHERE lower(value) = lower(?))');
    values.push(to);
  }
  const sql = `SELECT id, message_id, mail_from, rcpt_to, subject, received_at FROM messages
    ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id`;
  return db
    .prepare<string[], MessageRow>(sql)
    .all(...values)
    .map((r) => ({
      id: r.id,
      messageId: r.message_id,
      from: r.mail_from,
      to: JSON.parse(r.rcpt_to) as string[],
      subject: r.subject,
      receivedAt: r.received_at,
    }));
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** Unfolded header fields of a raw message, by lower-cased name (first occurrence wins). */
export function parseHeaders(raw: Buffer): Map<string, string> {
  const text = raw.toString('utf8');
  const end = text.search(/\r?\n\r?\n/);
  const block = (end === -1 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const headers = new Map<string, string>();
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(name)) headers.set(name, line.slice(colon + 1).trim());
  }
  return headers;
}

/** Decodes RFC 2047 encoded words (nodemailer encodes non-ASCII subjects that way). */
export function decodeEncodedWords(value: string): string {
  return value
    .replace(/(=\?[^?]+\?[bBqQ]\?[^?]*\?=)\s+(?==\?)/g, '$1')
    .replace(
      /=\?([^?*]+)(?:\*[^?]*)?\?([bBqQ])\?([^?]*)\?=/g,
      (word, charset: string, encoding: string, text: string) => {
        try {
          const bytes =
            encoding.toUpperCase() === 'B'
              ? Buffer.from(text, 'base64')
              : Buffer.from(
                  text
                    .replace(/_/g, ' ')
                    .replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))),
                  'latin1',
                );
          return new TextDecoder(charset).decode(bytes);
        } catch {
          return word;
        }
      },
    );
}
