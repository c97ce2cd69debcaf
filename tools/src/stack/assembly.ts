// The pieces every local stack is built from, assembled one way: the stack behind `npm run dev`
// (its servers process, servers/main.ts), a chaos or bench run's (chaos/chaos-stack.ts) and a test
// file's (test/helpers/harness.ts). They differ in where the pieces run, not in how they are made.
import path from 'node:path';
import { cliType } from '../../../src/temporal/client';
import { SEARCH_ATTRIBUTES } from '../../../src/contract';
import type { Proxy, Toxiproxy } from '../chaos/toxiproxy';
import { startMailServer, type MailServer, type MailServerOptions } from '../servers/mail-server';
import { startStripeServer, type StripeServer, type StripeServerOptions } from '../servers/stripe-server';

export interface StandInOptions {
  /** The Stripe-compatible API's options (its database is dir/stripe.db); none: no Stripe stand-in (a real key is configured). */
  stripe?: Omit<StripeServerOptions, 'dbPath'>;
  /** The SMTP server's and its mailbox API's (its database is dir/mail.db). */
  mail: Omit<MailServerOptions, 'dbPath'>;
}

export interface StandIns {
  stripe: StripeServer | undefined;
  mail: MailServer;
  close(): Promise<void>;
}

/** The Stripe and SMTP stand-ins, their records in `dir`. */
export async function startStandIns(
  dir: string,
  opts: StandInOptions & { stripe: StandInOptions['stripe'] & object },
): Promise<StandIns & { stripe: StripeServer }>;
export async function startStandIns(dir: string, opts: StandInOptions): Promise<StandIns>;
export async function startStandIns(dir: string, opts: StandInOptions): Promise<StandIns> {
  const stripe = opts.stripe && (await startStripeServer({ ...opts.stripe, dbPath: path.join(dir, 'stripe.db') }));
  try {
    const mail = await startMailServer({ ...opts.mail, dbPath: path.join(dir, 'mail.db') });
    return {
      stripe,
      mail,
      async close() {
        await mail.close();
        await stripe?.close();
      },
    };
  } catch (err) {
    await stripe?.close();
    throw err;
  }
}

export type DependencyProxies = { stripe: Proxy; smtp: Proxy; temporal: Proxy };

/** Toxiproxy in front of what workers reach over the network: Stripe, SMTP and the Temporal frontend. */
export async function proxyDependencies(
  toxiproxy: Toxiproxy,
  to: { stripeUrl: string; smtpPort: number; temporalAddress: string },
): Promise<DependencyProxies> {
  return {
    stripe: await toxiproxy.proxy('stripe', new URL(to.stripeUrl).host),
    smtp: await toxiproxy.proxy('smtp', `127.0.0.1:${to.smtpPort}`),
    temporal: await toxiproxy.proxy('temporal', to.temporalAddress),
  };
}

export interface DevServerOptions {
  port: number;
  uiPort: number;
  namespace?: string;
  /** Where it keeps its state; in memory when not given. */
  dbFile?: string;
  /** No Web UI (a chaos or bench run's). */
  headless?: boolean;
  logLevel: 'warn' | 'error';
  /** The codec server the Web UI decodes payloads through. */
  codecEndpoint?: string;
}

/** `temporal server start-dev`'s arguments, on 127.0.0.1, with our search attributes registered at start. */
export function devServerArgs(opts: DevServerOptions): string[] {
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--ui-port',
    String(opts.uiPort),
  ];
  if (opts.headless) args.push('--headless');
  if (opts.namespace) args.push('--namespace', opts.namespace);
  args.push('--log-level', opts.logLevel);
  if (opts.codecEndpoint) args.push('--ui-codec-endpoint', opts.codecEndpoint);
  for (const key of Object.values(SEARCH_ATTRIBUTES))
    args.push('--search-attribute', `${key.name}=${cliType(key.type)}`);
  // Last: the stack's pid file knows the process by its last argument, the run's own database file.
  if (opts.dbFile) args.push('--db-filename', opts.dbFile);
  return args;
}
