// Every error nodemailer can raise for one send, classified into the failure taxonomy by one
// table. The first row that matches decides. A server takes a message only with its final 250
// (RFC 5321), so any reply ≥ 400 proves it did not; a connection lost after the session began
// proves nothing, since the server may have stored the message and lost only its reply.
import type { NodemailerError } from 'nodemailer';
import type { Certainty, FailureCode } from '../reliability/taxonomy';

export interface SmtpErrorFacts {
  responseCode: number | null;
  response: string | null;
  /** nodemailer's error code: ECONNECTION, ETIMEDOUT, EENVELOPE, EMESSAGE, ESOCKET, EDNS … */
  code: string | null;
  /** The system error beneath it, e.g. ECONNREFUSED. */
  originalCode: string | null;
  timeoutType: string | null;
  /** The SMTP command the error belongs to; "API" when nodemailer refused before writing anything. */
  command: string | null;
}

export interface SmtpRule {
  when: (f: SmtpErrorFacts) => boolean;
  code: FailureCode;
  certainty: Certainty;
  reason: string;
}

const replied = (f: SmtpErrorFacts, test: (code: number) => boolean) => f.responseCode !== null && test(f.responseCode);
const RATE_TEXT = /rate|too many|throttl|try again later|retry after/i;
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

export const SMTP_RULES: SmtpRule[] = [
  // 5xx: refused for good. Bad address syntax is our input; anything else is the recipient's side.
  {
    when: (f) => replied(f, (c) => [501, 553, 555].includes(c)),
    code: 'INVALID_ARGUMENTS',
    certainty: 'not_executed',
    reason: 'address_invalid',
  },
  // 503 is "bad sequence of commands": a session problem that a new connection fixes.
  {
    when: (f) => replied(f, (c) => c === 503),
    code: 'TRANSIENT_DEPENDENCY',
    certainty: 'not_executed',
    reason: 'bad_sequence',
  },
  {
    when: (f) => replied(f, (c) => c >= 500),
    code: 'PERMANENT_BUSINESS',
    certainty: 'not_executed',
    reason: 'recipient_rejected',
  },
  {
    when: (f) => replied(f, (c) => c === 452),
    code: 'CAPACITY',
    certainty: 'not_executed',
    reason: 'server_storage_full',
  },
  {
    when: (f) => replied(f, (c) => c >= 400) && RATE_TEXT.test(f.response ?? ''),
    code: 'RATE_LIMIT',
    certainty: 'not_executed',
    reason: 'rate_limited',
  },
  {
    when: (f) => replied(f, (c) => c === 421 || c === 450),
    code: 'RATE_LIMIT',
    certainty: 'not_executed',
    reason: 'service_busy',
  },
  {
    when: (f) => replied(f, (c) => c >= 400),
    code: 'TRANSIENT_DEPENDENCY',
    certainty: 'not_executed',
    reason: 'temporary_failure',
  },
  // Refused before anything reached the server.
  {
    when: (f) => f.code === 'EENVELOPE' || f.code === 'ECONFIG',
    code: 'INVALID_ARGUMENTS',
    certainty: 'not_executed',
    reason: 'envelope_invalid',
  },
  {
    when: (f) => f.command === 'API' && f.code !== 'ESTREAM',
    code: 'TRANSIENT_DEPENDENCY',
    certainty: 'not_executed',
    reason: 'client_refused',
  },
  { when: (f) => f.code === 'EDNS', code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'dns_failed' },
  {
    when: (f) =>
      f.code === 'ETIMEDOUT' && (f.timeoutType === 'CONNECT_TIMEOUT' || f.timeoutType === 'GREETING_TIMEOUT'),
    code: 'TRANSIENT_DEPENDENCY',
    certainty: 'not_executed',
    reason: 'connect_timeout',
  },
  {
    when: (f) => f.originalCode !== null && CONNECT_FAILURES.has(f.originalCode),
    code: 'TRANSIENT_DEPENDENCY',
    certainty: 'not_executed',
    reason: 'connection_refused',
  },
  // Anything else came after the session began: the message may have been accepted.
  {
    when: (f) => f.code === 'ETIMEDOUT',
    code: 'UNKNOWN_OUTCOME',
    certainty: 'may_have_executed',
    reason: 'reply_timeout',
  },
  { when: () => true, code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'connection_lost' },
];

export interface SmtpClassification {
  code: FailureCode;
  certainty: Certainty;
  reason: string;
  facts: SmtpErrorFacts;
  retryAfterMs: number | null;
}

export function smtpFacts(err: NodemailerError): SmtpErrorFacts {
  return {
    responseCode: typeof err.responseCode === 'number' ? err.responseCode : null,
    response: err.response ?? null,
    code: err.code ?? null,
    originalCode: err.originalCode ?? null,
    timeoutType: err.timeoutType ?? null,
    command: err.command ?? null,
  };
}

export function classifySmtpError(err: NodemailerError): SmtpClassification {
  const facts = smtpFacts(err);
  const rule = SMTP_RULES.find((r) => r.when(facts))!;
  return {
    code: rule.code,
    certainty: rule.certainty,
    reason: rule.reason,
    facts,
    retryAfterMs: smtpRetryAfterMs(facts.response),
  };
}

/** SMTP has no Retry-After header; servers that rate-limit say it in words ("retry after 30s", "try again in 2 seconds"). */
export function smtpRetryAfterMs(response: string | null): number | null {
  const match = /(?:retry after|try again in)\s+(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds?|m|min|minutes?)?\b/i.exec(
    response ?? '',
  );
  if (!match) return null;
  const value = Number(match[1]);
  const unit = (match[2] ?? 's').toLowerCase();
  const ms = unit === 'ms' ? value : unit.startsWith('m') ? value * 60_000 : value * 1000;
  return ms > 0 ? Math.ceil(ms) : null;
}
