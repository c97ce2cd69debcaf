// The Stripe client the payment activities send with: the official SDK over our transport, with
// no retries of its own and a per-request timeout.
import Stripe from 'stripe';
import { StripeTransport } from './stripe-transport';

export interface StripeClientConfig {
  secretKey: string;
  apiBase?: string;
  /** One request, answer included; must end well inside the activity's start-to-close. */
  requestTimeoutMs?: number;
}

export function createStripeClient(cfg: StripeClientConfig): Stripe {
  return new Stripe(cfg.secretKey, {
    // Temporal's activity retry policy owns retries; our transport gives the SDK no error it would resend on.
    maxNetworkRetries: 0,
    httpClient: new StripeTransport(),
    timeout: cfg.requestTimeoutMs ?? 10_000,
    ...(cfg.apiBase !== undefined && apiBaseConfig(cfg.apiBase)),
  });
}

function apiBaseConfig(apiBase: string): Pick<Stripe.StripeConfig, 'host' | 'port' | 'protocol'> {
  const url = new URL(apiBase);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`apiBase must be http(s): ${apiBase}`);
  // The SDK always requests /v1/...; a base with a path would silently be ignored.
  if (url.pathname !== '/' || url.search !== '') throw new Error(`apiBase must not have a path or query: ${apiBase}`);
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (protocol === 'https' ? 443 : 80) : Number(url.port),
    protocol,
  };
}
