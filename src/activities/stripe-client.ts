// The Stripe client the payment activities send with: the official SDK over our transport, retrying nothing itself.
import Stripe from 'stripe';
import type { OrderStore } from '../store';
import type { Attempt, AttemptRunner } from './attempt';
import { StripeTransport } from './stripe-transport';

export interface StripeClientConfig {
  secretKey: string;
  apiBase?: string;
  /** One request, answer included; must end well inside the activity's start-to-close. */
  requestTimeoutMs?: number;
}

/** Each client made here: its config, its transport, and the clients lent out for it that no attempt holds now. */
const made = new WeakMap<Stripe, { cfg: StripeClientConfig; transport: StripeTransport; idle: Stripe[] }>();

export function createStripeClient(cfg: StripeClientConfig, attempt?: Attempt): Stripe {
  const transport = new StripeTransport(attempt);
  const client = new Stripe(cfg.secretKey, {
    // Temporal's activity retry policy owns retries; our transport gives the SDK no error it would resend on.
    maxNetworkRetries: 0,
    httpClient: transport,
    timeout: cfg.requestTimeoutMs ?? 10_000,
    // A lent client's next request would tell Stripe an earlier attempt's (another run's) request id and timing.
    telemetry: false,
    ...(cfg.apiBase !== undefined && apiBaseConfig(cfg.apiBase)),
  });
  made.set(client, { cfg, transport, idle: [] });
  return client;
}

/** The Stripe client an activity attempt sends with (what the activities are given). */
export type StripeFor = (attempt: Attempt) => Stripe;

/** What an activity that asks Stripe and the store is given. */
export type StripeDeps = { stripe: StripeFor; store: OrderStore; attempt: AttemptRunner };

/**
 * The worker's client as `attempt` sends with it (its requests counted and cut to the attempt): the SDK tells its
 * transport nothing of the call, so the attempt holds a client of its own, lent from a pool (building one costs) and
 * given back once the attempt's body has settled. One not made here (a test's) is used as is.
 */
export function stripeIn(stripe: Stripe, attempt: Attempt): Stripe {
  const pool = made.get(stripe);
  if (!pool) return stripe;
  const lent = pool.idle.pop() ?? createStripeClient(pool.cfg);
  const { transport } = made.get(lent)!;
  transport.attempt = attempt;
  attempt.settled?.push(() => {
    transport.attempt = null;
    // The SDK reaches the transport some microtasks after a call: a request the body never awaited reaches it, refused
    // as its attempt ended, before the client is lent again.
    setImmediate(() => pool.idle.push(lent));
  });
  return lent;
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
