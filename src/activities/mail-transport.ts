// The SMTP client the notification activities hand their mail to, built from the configured URL.
import nodemailer, { type Transporter } from 'nodemailer';
import { smtpTlsFor } from '../config';

/** The shortest smtp attempt a worker accepts: twice the 5 s connecting and the greeting may take, so a send has time left. */
export const SMTP_MIN_ATTEMPT_MS = 10_000;

export interface SmtpSettings {
  /** Credentials kept out of the URL; a URL's own user:password is used when these are not given. */
  auth?: { user: string; pass: string };
  /** off: plain (the local server); starttls: STARTTLS required before anything is sent; implicit: TLS from the first byte. */
  tls: 'off' | 'starttls' | 'implicit';
  /** false only for a relay with a certificate this host cannot verify (a test relay); never for a real one. */
  rejectUnauthorized: boolean;
}

/**
 * One SMTP connection per send, no pooling: an activity attempt is exactly one delivery attempt. Connecting takes 5 s at
 * most, each reply 15 s, and the send's own deadline (request-deadline.ts) cuts it inside the attempt.
 */
export function createMailTransport(smtpUrl: string, settings?: SmtpSettings): Transporter {
  const url = new URL(smtpUrl);
  const tls = settings?.tls ?? smtpTlsFor(smtpUrl);
  const fromUrl = url.username
    ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) }
    : undefined;
  return nodemailer.createTransport({
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port || (tls === 'implicit' ? 465 : 587)),
    secure: tls === 'implicit',
    requireTLS: tls === 'starttls',
    ignoreTLS: tls === 'off',
    tls: { rejectUnauthorized: settings?.rejectUnauthorized ?? true },
    auth: settings?.auth ?? fromUrl,
    pool: false,
    connectionTimeout: 5_000,
    greetingTimeout: 5_000,
    socketTimeout: 15_000,
    dnsTimeout: 5_000,
  });
}
