// A mail provider's log of the messages it accepted, searched by Message-ID (SES, Postmark, SendGrid and others keep
// one): what settles an email whose hand-over is unknown without a person, as Stripe's list settles a refund.

/** One accepted message, as the log shows it. */
export interface LoggedMessage {
  /** The provider's own id for it. */
  id: string;
  acceptedAt: string;
}

/** What a real provider's client implements; `httpMessageLog` speaks the local SMTP server's mailbox API. */
export interface MessageLog {
  /** How long after a send is off the wire the log may still not show it: a miss proves nothing before then. */
  readonly consistencyMs: number;
  /** The log's entries for the Message-ID (none: it has no such message); throws when the log cannot be read. */
  find(messageId: string): Promise<LoggedMessage[]>;
}

export interface MessageLogSettings {
  /** The log's base URL: `GET <url>/messages?message_id=<id>` answers `{ messages: [{ id, messageId, receivedAt }] }`. */
  url: string;
  consistencyMs: number;
  /** How long one lookup may take. */
  timeoutMs?: number;
}

export function httpMessageLog({ url, consistencyMs, timeoutMs = 5000 }: MessageLogSettings): MessageLog {
  return {
    consistencyMs,
    async find(messageId) {
      const res = await fetch(`${url.replace(/\/$/, '')}/messages?message_id=${encodeURIComponent(messageId)}`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) throw new Error(`the message log answered ${res.status} for ${messageId}`);
      const body = (await res.json()) as { messages?: { id: unknown; messageId: unknown; receivedAt: unknown }[] };
      if (!Array.isArray(body.messages)) throw new Error(`the message log's answer for ${messageId} lists no messages`);
      // Only an exact match counts: a log that ignored the filter must not settle another message.
      return body.messages
        .filter((m) => m.messageId === messageId)
        .map((m) => ({ id: String(m.id), acceptedAt: String(m.receivedAt) }));
    },
  };
}
