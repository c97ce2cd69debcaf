// Every error nodemailer can raise for one send, classified into the failure taxonomy by one
// table. The first row that matches decides. A server takes a message only with its final 250
// (RFC 5321), so any reply ≥ 400 proves it did not; a connection lost after the session began
// proves nothing, since the server may have stored the message and lost only its reply.
import type { NodemailerError } from 'nodemailer';
import { HEALTH_FAILURES } from '../reliability/circuit-breaker';
import { Classified } from './attempt';
import { classifyBy, rule, type Rule } from './failure-rules';
import type { MailFacts } from './outbox';

/** The facts about a nodemailer error that decide its class. */
export type SmtpErrorFacts = ReturnType<typeof smtpFacts>;

const replied = (f: SmtpErrorFacts, test: (code: number) => boolean) => f.responseCode !== null && test(f.responseCode);
const RATE_TEXT = /rate|too many|throttl|try again later|retry after/i;
const RETRY_IN = /(?:retry after|try again in)\s+(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds?|m|min|minutes?)?\b/i;
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const rateLimited = (f: SmtpErrorFacts) => replied(f, (c) => c >= 400) && RATE_TEXT.test(f.response ?? '');
const connectTimeout = (f: SmtpErrorFacts) =>
  f.code === 'ETIMEDOUT' && (f.timeoutType === 'CONNECT_TIMEOUT' || f.timeoutType === 'GREETING_TIMEOUT');
const refused = (f: SmtpErrorFacts) => f.originalCode !== null && CONNECT_FAILURES.has(f.originalCode);

export const SMTP_RULES: Rule<SmtpErrorFacts>[] = [
  // 5xx: refused for good. Bad address syntax is our input; anything else is the recipient's side.
  rule((f) => replied(f, (c) => [501, 553, 555].includes(c)), 'INVALID_ARGUMENTS', 'not_executed', 'address_invalid'),
  // 503 is "bad sequence of commands": a session problem that a new connection fixes.
  rule((f) => replied(f, (c) => c === 503), 'TRANSIENT_DEPENDENCY', 'not_executed', 'bad_sequence'),
  rule((f) => replied(f, (c) => c >= 500), 'PERMANENT_BUSINESS', 'not_executed', 'recipient_rejected'),
  rule((f) => replied(f, (c) => c === 452), 'CAPACITY', 'not_executed', 'server_storage_full'),
  rule(rateLimited, 'RATE_LIMIT', 'not_executed', 'rate_limited'),
  rule((f) => replied(f, (c) => c === 421 || c === 450), 'RATE_LIMIT', 'not_executed', 'service_busy'),
  rule((f) => replied(f, (c) => c >= 400), 'TRANSIENT_DEPENDENCY', 'not_executed', 'temporary_failure'),
  // Refused before anything reached the server.
  rule((f) => f.code === 'EENVELOPE' || f.code === 'ECONFIG', 'INVALID_ARGUMENTS', 'not_executed', 'envelope_invalid'),
  rule((f) => f.command === 'API' && f.code !== 'ESTREAM', 'TRANSIENT_DEPENDENCY', 'not_executed', 'client_refused'),
  rule((f) => f.code === 'EDNS', 'TRANSIENT_DEPENDENCY', 'not_executed', 'dns_failed'),
  rule(connectTimeout, 'TRANSIENT_DEPENDENCY', 'not_executed', 'connect_timeout'),
  rule(refused, 'TRANSIENT_DEPENDENCY', 'not_executed', 'connection_refused'),
  // Anything else came after the session began: the message may have been accepted.
  rule((f) => f.code === 'ETIMEDOUT', 'UNKNOWN_OUTCOME', 'may_have_executed', 'reply_timeout'),
  rule(() => true, 'UNKNOWN_OUTCOME', 'may_have_executed', 'connection_lost'),
];

export function smtpFacts(err: NodemailerError) {
  return {
    responseCode: typeof err.responseCode === 'number' ? err.responseCode : null,
    response: err.response ?? null,
    /** nodemailer's error code: ECONNECTION, ETIMEDOUT, EENVELOPE, EMESSAGE, ESOCKET, EDNS … */
    code: err.code ?? null,
    /** The system error beneath it, e.g. ECONNREFUSED. */
    originalCode: err.originalCode ?? null,
    timeoutType: err.timeoutType ?? null,
    /** The SMTP command the error belongs to; "API" when nodemailer refused before writing anything. */
    command: err.command ?? null,
  };
}

export function classifySmtpError(err: NodemailerError) {
  const facts = smtpFacts(err);
  return { ...classifyBy(SMTP_RULES, facts), facts, retryAfterMs: smtpRetryAfterMs(facts.response) };
}

/** SMTP has no Retry-After header; servers that rate-limit say it in words ("retry after 30s", "try again in 2 seconds"). */
export function smtpRetryAfterMs(response: string | null): number | null {
  const match = RETRY_IN.exec(response ?? '');
  if (!match) return null;
  const value = Number(match[1]);
  const unit = (match[2] ?? 's').toLowerCase();
  const ms = unit === 'ms' ? value : unit.startsWith('m') ? value * 60_000 : value * 1000;
  return ms > 0 ? Math.ceil(ms) : null;
}

/** A failed send of the message `mail` names, as a classified failure. */
export function smtpFailure(err: NodemailerError, mail: MailFacts): Classified {
  const c = classifySmtpError(err);
  const message = `sending ${mail.messageId} to ${mail.recipient} failed: ${err.response ?? err.message}`;
  const provider = { ...mail, ...c.facts };
  return new Classified(c.code, c.certainty, c.reason, message, {
    retryAfterMs: c.retryAfterMs,
    provider,
    cause: err,
    health: HEALTH_FAILURES.has(c.code),
  });
}

/** Failures that happen before any SMTP session with the server exists. */
const NO_SESSION = new Set([
  'connection_refused',
  'dns_failed',
  'connect_timeout',
  'client_refused',
  'envelope_invalid',
]);

/** Whether a failed send counts as a request the server received: any did but one whose session never began. */
export const reachedServer = (failure: Classified) => !NO_SESSION.has(failure.reason);
