// Customer addresses masked wherever an operator reads a run: query results, failure details, logs; and a server
// URL's credentials kept out of error messages. Workflow code imports this module, so it stays pure.

/** The domain of our own Message-IDs: they look like addresses, but they are evidence operators need whole. */
export const MESSAGE_ID_DOMAIN = 'durable-refunds.local';

const EMAIL = /([A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@([A-Za-z0-9.-]+\.[A-Za-z]{2,})/g;

/** "customer@example.test" → "c***@example.test": enough for an operator to tell two customers apart, not to mail one. */
export function maskEmails(text: string): string {
  return text.replace(EMAIL, (whole, first: string, domain: string) =>
    domain === MESSAGE_ID_DOMAIN ? whole : `${first}***@${domain}`,
  );
}

/** A copy of a value with every email address in its strings masked, for query results and failure details. */
export function redact<T>(value: T): T {
  if (typeof value === 'string') return maskEmails(value) as T;
  if (Array.isArray(value)) return value.map(redact) as T;
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redact(v)])) as T;
  return value;
}

/** A server URL without its credentials: `postgres://***@host/db`. */
export const redactUrl = (url: string) => url.replace(/\/\/[^@/]*@/, '//***@');
