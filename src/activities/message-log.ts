// A mail provider's log of the messages it accepted, searched by Message-ID (SES, Postmark, SendGrid and others keep
// one): what settles an email whose hand-over is unknown without a person, as Stripe's list settles a refund.

/** How an outbox entry settled from the log begins its response, where the mail server's answer would be. */
export const RECONCILED_FROM_LOG = 'reconciled:';

/**
 * What a real provider's client implements (`httpMessageLog`: the local server's API). It must find a message by our
 * Message-ID header: a provider that replaces it cannot serve, as every unknown hand-over would be sent again.
 */
export interface MessageLog {
  /** How long after a send is off the wire the log may still not show it (its lag, a relay's late accept). */
  readonly consistencyMs: number;
  /** The log's entries for the Message-ID, with the provider's own ids (none: no such message); throws if unreadable. */
  find(messageId: string): Promise<{ id: string; acceptedAt: string }[]>;
}

export interface MessageLogSettings {
  /** The log's base URL: `GET <url>/messages?message_id=<id>` answers `{ messages: [{ id, messageId, receivedAt }] }`. */
  url: string;
  consistencyMs: number;
  /** How long one lookup may take. */
  timeoutMs?: number;
  /** Sent as `Authorization: Bearer <token>` (MAIL_LOG_TOKEN). */
  token?: string;
}

export function httpMessageLog({ url, consistencyMs, timeoutMs = 5000, token }: MessageLogSettings): MessageLog {
  return {
    consistencyMs,
    async find(messageId) {
      const res = await fetch(`${url.replace(/\/$/, '')}/messages?message_id=${encodeURIComponent(messageId)}`, {
        signal: AbortSignal.timeout(timeoutMs),
        ...(token && { headers: { authorization: `Bearer ${token}` } }),
      });
      if (!res.ok) throw new Error(`the message log answered ${res.status} for ${messageId}`);
      const body = (await res.json()) as { messages?: { id: unknown; messageId: unknown; receivedAt: unknown }[] };
      if (!Array.isArray(body.messages)) throw new Error(`the message log's answer for ${messageId} lists no messages`);
      // Only the same Message-ID counts (with or without its angle brackets): a log that ignored the filter, or shows
      // the id without its brackets, neither settles another message nor makes a miss of this one.
      const bare = unbracketed(messageId);
      return body.messages
        .filter((m) => typeof m.messageId === 'string' && unbracketed(m.messageId) === bare)
        .map((m) => ({ id: String(m.id), acceptedAt: String(m.receivedAt) }));
    },
  };
}

const unbracketed = (id: string) => id.trim().replace(/^<(.*)>$/, '$1');
