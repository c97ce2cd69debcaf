// Every setting the project reads from the environment, validated once (their schema: env.ts).
import { isIPv4 } from 'node:net';
import path from 'node:path';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { WORKER_POOLS } from '../contract';
import { parseKeyring } from '../codec/keyring';
import { envSchema } from './env';
import { reading, zodProblems } from '../domain/zod-problems';
import { redactUrl } from '../reliability/redaction';

export { LOCAL_PORTS, PROJECT_ROOT, type LogLevelName, type TraceExporter } from './env';

export type Config = ReturnType<typeof loadConfig>;

/** How long real Stripe keeps an idempotency key's response. */
const STRIPE_KEY_TTL_HOURS = 24;

/**
 * Where Temporal is, read the way the `temporal` CLI reads it (@temporalio/envconfig): the
 * profile TEMPORAL_PROFILE names (default "default") in TEMPORAL_CONFIG_FILE or the default
 * temporal.toml, overridden by TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY and the
 * TEMPORAL_TLS* variables. Nothing set: the local dev server.
 */
function temporalTarget(env: NodeJS.ProcessEnv) {
  const loaded = reading(
    'invalid environment: Temporal client configuration (TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE): ',
    () => loadClientConnectConfig({ profile: env.TEMPORAL_PROFILE, overrideEnvVars: env as Record<string, string> }),
  );
  const address = loaded.connectionOptions.address ?? '127.0.0.1:7233';
  return {
    address,
    namespace: loaded.namespace ?? 'default',
    connection: { ...loaded.connectionOptions, address },
    profile: env.TEMPORAL_PROFILE ?? 'default',
    /** A server on this machine: the local stack's, which may use a key file of its own. */
    local: isLoopback(address.replace(/:\d+$/, '')),
  };
}

/** The local Stripe server's endpoint secret: both ends are on this machine, so a fixed one is enough. */
export const LOCAL_WEBHOOK_SECRET = 'whsec_local_durable_refunds';
export const WEBHOOK_PATH = '/webhooks/stripe';

/** A host on this machine: an address in 127.0.0.0/8, localhost or ::1 (bracketed, as a URL's hostname has it, or not). */
const isLoopback = (host: string) =>
  ['localhost', '::1', '[::1]'].includes(host) || (isIPv4(host) && host.startsWith('127.'));

/** How a URL names a server listening on `host`: one on every address is reached on loopback; an IPv6 address goes in brackets. */
export function urlHost(host: string): string {
  if (['0.0.0.0', '::'].includes(host)) return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/** A relay that is not on this machine gets TLS unless told otherwise: credentials and customers' addresses never cross a network in the clear. */
export function smtpTlsFor(url: string): 'off' | 'starttls' | 'implicit' {
  if (url.startsWith('smtps:')) return 'implicit';
  return isLoopback(smtpHostOf(url)) ? 'off' : 'starttls';
}

function smtpHostOf(url: string): string {
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  if (!parsed || !['smtp:', 'smtps:'].includes(parsed.protocol) || !parsed.hostname)
    throw new Error(
      `invalid environment: SMTP_URL: "${redactUrl(url)}" is not a URL of the form smtp://host:port or smtps://host:465`,
    );
  return parsed.hostname;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) throw new Error(`invalid environment: ${zodProblems(parsed.error, '')}`);
  const e = parsed.data;
  const liveKey = /^(sk|rk)_live_/.test(e.STRIPE_SECRET_KEY ?? '');
  if (liveKey && e.STRIPE_LIVE_MODE !== 'allow')
    throw new Error(
      'invalid environment: STRIPE_SECRET_KEY: a live-mode key refunds real money; this process refuses it unless STRIPE_LIVE_MODE=allow ' +
        '(set it only where live refunds are meant to run, never in a shell or test environment)',
    );
  const smtpUrl = e.SMTP_URL ?? `smtp://127.0.0.1:${e.SMTP_PORT}`;
  smtpHostOf(smtpUrl); // refuses a URL that is not smtp(s)://host, whatever SMTP_TLS says
  const smtpTls = e.SMTP_TLS ?? smtpTlsFor(smtpUrl);
  if (e.SMTP_PASSWORD !== undefined && e.SMTP_USER === undefined)
    throw new Error('invalid environment: SMTP_PASSWORD: set SMTP_USER with it');
  // The local Stripe-compatible server is what runs with no key, or on loopback with a key that is not live.
  // A base off this machine (an egress proxy) leads to real Stripe: its scope and key-window rules apply.
  const stripeLocal =
    !e.STRIPE_SECRET_KEY ||
    (e.STRIPE_API_BASE !== undefined && isLoopback(new URL(e.STRIPE_API_BASE).hostname) && !liveKey);
  // Two environments sharing one Stripe account would otherwise derive the same keys and operation ids.
  if (!stripeLocal && e.OPERATION_SCOPE === undefined)
    throw new Error(
      'invalid environment: OPERATION_SCOPE: must name this environment (e.g. "staging") when refunds go to real Stripe',
    );
  // A longer window would resend with the same key after Stripe forgot it, without reconciling first: a second refund.
  if (!stripeLocal && e.STRIPE_IDEMPOTENCY_TTL_HOURS > STRIPE_KEY_TTL_HOURS)
    throw new Error(
      `invalid environment: STRIPE_IDEMPOTENCY_TTL_HOURS: Stripe keeps an idempotency key's response for ${STRIPE_KEY_TTL_HOURS} hours; ` +
        `with real Stripe this must be at most ${STRIPE_KEY_TTL_HOURS} (${e.STRIPE_IDEMPOTENCY_TTL_HOURS} given), and the worker trusts it a margin less`,
    );
  const keys = reading('invalid environment: ', () =>
    e.PAYLOAD_KEYS === undefined ? undefined : parseKeyring(e.PAYLOAD_KEYS, 'PAYLOAD_KEYS'),
  );
  if (!isLoopback(e.CODEC_HOST) && !e.CODEC_AUTH_TOKEN && e.CODEC_AUTH !== 'proxy')
    throw new Error(
      `invalid environment: CODEC_HOST: the codec server decrypts for anyone who reaches it; on ${e.CODEC_HOST} it needs CODEC_AUTH_TOKEN, ` +
        'or CODEC_AUTH=proxy when an authenticating proxy in front of it checks every caller',
    );
  if (e.PAYLOAD_ENCRYPTION === 'off' && e.PAYLOAD_PLAINTEXT === 'reject')
    throw new Error(
      'invalid environment: PAYLOAD_PLAINTEXT: reject needs PAYLOAD_ENCRYPTION=on (with encryption off every payload is plaintext)',
    );
  if (e.METRICS_PROMETHEUS_ADDRESS && e.METRICS_OTLP_URL)
    throw new Error(
      'invalid environment: METRICS_OTLP_URL: the worker exports its metrics one way; set METRICS_PROMETHEUS_ADDRESS or METRICS_OTLP_URL, not both',
    );
  if (e.WORKER_VERSIONING === 'off' && (e.WORKER_DEPLOYMENT_NAME || e.WORKER_BUILD_ID))
    throw new Error(
      `invalid environment: ${e.WORKER_DEPLOYMENT_NAME ? 'WORKER_DEPLOYMENT_NAME' : 'WORKER_BUILD_ID'}: set WORKER_VERSIONING=on with it (without it the worker is unversioned, and the setting would do nothing)`,
    );
  // Bundled at start, the code (so its hash) would depend on the host's checkout or lib/ and its directory:
  // two hosts of one build could poll as two versions, and the pools of the one promoted would go unserved.
  if (e.WORKER_VERSIONING === 'on' && !e.WORKER_BUILD_ID && !e.WORKFLOW_BUNDLE)
    throw new Error(
      'invalid environment: WORKER_VERSIONING: a versioned worker needs its build fixed: set WORKFLOW_BUNDLE to the bundle `npm run build` made (its hash is the build id) or WORKER_BUILD_ID',
    );
  return {
    scope: e.OPERATION_SCOPE ?? 'local',
    encryption: {
      enabled: e.PAYLOAD_ENCRYPTION === 'on',
      keys,
      keysFile: e.PAYLOAD_KEYS_FILE,
      localKeysFile: path.join(e.DATA_DIR, 'payload-keys'),
      plaintext: e.PAYLOAD_PLAINTEXT ?? (e.PAYLOAD_ENCRYPTION === 'on' ? 'reject' : 'allow'),
      compress: e.PAYLOAD_COMPRESSION === 'on',
    },
    codec: {
      port: e.CODEC_PORT,
      host: e.CODEC_HOST,
      endpoint: `http://${urlHost(e.CODEC_HOST)}:${e.CODEC_PORT}`,
      origins: e.CODEC_CORS_ORIGINS?.split(',')
        .map((o) => o.trim())
        .filter(Boolean) ?? [`http://localhost:${e.TEMPORAL_UI_PORT}`, `http://127.0.0.1:${e.TEMPORAL_UI_PORT}`],
      authToken: e.CODEC_AUTH_TOKEN,
    },
    policyFile: e.RECOVERY_POLICY_FILE,
    faultInjection: e.FAULT_INJECTION === 'on',
    deciders: e.DECIDERS,
    unsignedDecisions: e.DECISIONS_UNSIGNED === 'allow',
    digestTo: e.DIGEST_TO,
    /** A workflow bundle built ahead of time (bundleWorkflowCode's code, in a file); unset, the worker bundles at start. */
    workflowBundle: e.WORKFLOW_BUNDLE,
    /**
     * The webhook receiver runs in the worker when a signing secret is set; with the local Stripe
     * server it has one by default, and the server delivers to it. WEBHOOKS=off leaves runs to poll.
     */
    webhooks: {
      // The fixed local secret only for the local server on loopback: anywhere else it would let anyone sign.
      secret:
        e.WEBHOOKS === 'off'
          ? undefined
          : (e.STRIPE_WEBHOOK_SECRET ??
            (!e.STRIPE_SECRET_KEY && isLoopback(e.WEBHOOK_HOST) ? LOCAL_WEBHOOK_SECRET : undefined)),
      port: e.WEBHOOK_PORT,
      host: e.WEBHOOK_HOST,
      /** Where the local Stripe server delivers: the worker's receiver, reached on loopback when it listens on every address. */
      url: `http://${urlHost(e.WEBHOOK_HOST)}:${e.WEBHOOK_PORT}${WEBHOOK_PATH}`,
    },
    schedules: { timeZone: e.SCHEDULE_TIME_ZONE, file: e.SCHEDULES_FILE },
    dataDir: e.DATA_DIR,
    temporal: temporalTarget(env),
    databaseUrl: e.DATABASE_URL ?? `sqlite:${path.join(e.DATA_DIR, 'orders.db')}`,
    stripe: {
      secretKey: e.STRIPE_SECRET_KEY ?? 'sk_test_local',
      apiBase: e.STRIPE_API_BASE ?? (stripeLocal ? `http://127.0.0.1:${e.STRIPE_PORT}` : undefined),
      local: stripeLocal,
      idempotencyTtlMs: e.STRIPE_IDEMPOTENCY_TTL_HOURS * 3600_000,
      requestTimeoutMs: e.STRIPE_TIMEOUT_MS,
      listConsistencyMs: e.STRIPE_LIST_CONSISTENCY_MS,
    },
    taskQueue: e.TASK_QUEUE,
    worker: {
      pools: e.WORKER_POOLS ?? [...WORKER_POOLS],
      slots: {
        workflows: e.WORKER_WORKFLOW_SLOTS,
        effects: e.WORKER_EFFECT_SLOTS,
        reconcile: e.WORKER_RECONCILE_SLOTS,
      },
      health: e.HEALTH_ADDRESS,
      /** With WORKER_VERSIONING=on: the deployment and the build id given (src/lifecycle/deployment.ts derives what is not). */
      versioning:
        e.WORKER_VERSIONING === 'on'
          ? { deploymentName: e.WORKER_DEPLOYMENT_NAME, buildId: e.WORKER_BUILD_ID }
          : undefined,
      shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
      stickyTimeoutMs: e.STICKY_TIMEOUT_MS,
    },
    admission: { maxBacklog: e.ADMISSION_MAX_BACKLOG },
    logLevel: e.LOG_LEVEL,
    tracing: { exporter: e.OTEL_TRACES_EXPORTER, serviceName: e.OTEL_SERVICE_NAME },
    metrics: { prometheusAddress: e.METRICS_PROMETHEUS_ADDRESS, otlpUrl: e.METRICS_OTLP_URL },
    stripeLiveMode: e.STRIPE_LIVE_MODE === 'allow',
    mail: {
      smtpUrl,
      /** What the transport needs beyond the URL: credentials kept out of it, and how TLS is used. */
      smtp: {
        auth: e.SMTP_USER === undefined ? undefined : { user: e.SMTP_USER, pass: e.SMTP_PASSWORD ?? '' },
        tls: smtpTls,
        rejectUnauthorized: e.SMTP_TLS_REJECT_UNAUTHORIZED === 'true',
      },
      /** The local SMTP stand-in's mailbox API, where inspect and the demo read what it received. */
      mailboxUrl: `http://127.0.0.1:${e.MAILBOX_PORT}`,
      from: e.MAIL_FROM,
      log:
        e.MAIL_LOG_URL === undefined
          ? undefined
          : { url: e.MAIL_LOG_URL, consistencyMs: e.MAIL_LOG_CONSISTENCY_MS, token: e.MAIL_LOG_TOKEN },
    },
  };
}
