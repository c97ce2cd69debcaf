// Every setting the project reads from the environment, validated once.
import path from 'node:path';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { NativeConnectionOptions } from '@temporalio/worker';
import { z } from 'zod';
import { SCOPE_PATTERN, TASK_QUEUE, WORKER_POOLS, type WorkerPool } from './contract';
import { decisionsSchema } from './reliability/policy-schema';
import { parseKeyring } from './codec/keyring';

export const PROJECT_ROOT = path.resolve(__dirname, '..');

const port = z.coerce.number().int().min(1).max(65535);

// Here, not beside the logger and the tracer: reading the configuration must not load pino or the OpenTelemetry SDK.
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];
export const TRACE_EXPORTERS = ['none', 'console', 'otlp'] as const;
export type TraceExporter = (typeof TRACE_EXPORTERS)[number];

/**
 * Where the local stack (tools/) runs its Temporal Web UI and its Stripe and SMTP stand-ins. The
 * product reads them only for defaults: the stand-ins' URLs when no provider is configured, and the
 * local Web UI as the codec server's origin. The stand-ins' own settings are tools/src/config.ts's.
 */
export const LOCAL_PORTS = { temporalUi: 8233, stripe: 4242, smtp: 2525, mailbox: 8025 } as const;

const envSchema = z.object({
  DATA_DIR: z.string().min(1).default(path.join(PROJECT_ROOT, '.data')),
  TEMPORAL_UI_PORT: port.default(LOCAL_PORTS.temporalUi),
  DATABASE_URL: z.string().min(1).optional(),
  STRIPE_SECRET_KEY: z.string().min(1).optional(),
  STRIPE_API_BASE: z.string().url().optional(),
  STRIPE_PORT: port.default(LOCAL_PORTS.stripe),
  STRIPE_IDEMPOTENCY_TTL_HOURS: z.coerce.number().positive().default(24),
  SMTP_PORT: port.default(LOCAL_PORTS.smtp),
  MAILBOX_PORT: port.default(LOCAL_PORTS.mailbox),
  SMTP_URL: z.string().min(1).optional(),
  SMTP_USER: z.string().min(1).optional(),
  SMTP_PASSWORD: z.string().min(1).optional(),
  /** off: plain SMTP (the local server); starttls: STARTTLS required before anything is sent; implicit: TLS from the first byte (port 465). */
  SMTP_TLS: z.enum(['off', 'starttls', 'implicit']).optional(),
  SMTP_TLS_REJECT_UNAUTHORIZED: z.enum(['true', 'false']).default('true'),
  /** A live-mode Stripe key is refused unless this says allow: see the README's Production section. */
  STRIPE_LIVE_MODE: z.enum(['refuse', 'allow']).default('refuse'),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  /** The standard OpenTelemetry variable: where the worker's traces go (otlp: to OTEL_EXPORTER_OTLP_ENDPOINT). */
  OTEL_TRACES_EXPORTER: z.enum(TRACE_EXPORTERS).default('none'),
  OTEL_SERVICE_NAME: z.string().min(1).default('durable-refunds-worker'),
  /** Where the worker serves its metrics for Prometheus to scrape (`/metrics`), host:port; unset: not served. */
  METRICS_PROMETHEUS_ADDRESS: z
    .string()
    .regex(/^\S+:\d{1,5}$/, 'must be host:port, e.g. 0.0.0.0:9464')
    .optional(),
  /** An OpenTelemetry collector the worker pushes its metrics to: OTLP/HTTP when the URL ends in /v1/metrics, else OTLP/gRPC. */
  METRICS_OTLP_URL: z
    .string()
    .regex(/^(grpc|http)s?:\/\/\S+$/, 'must be a grpc(s):// or http(s):// URL')
    .optional(),
  TASK_QUEUE: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,200}$/, 'must be 1-200 letters, digits, ".", "_" or "-"')
    .default(TASK_QUEUE),
  MAIL_FROM: z.string().email().default('refunds@durable-refunds.test'),
  OPERATION_SCOPE: z.string().regex(SCOPE_PATTERN, 'must be 1-32 lowercase letters, digits, "_" or "-"').optional(),
  RECOVERY_POLICY_FILE: z.string().min(1).optional(),
  STRIPE_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  STRIPE_LIST_CONSISTENCY_MS: z.coerce.number().int().min(0).max(3600_000).default(10_000),
  FAULT_INJECTION: z.enum(['on', 'off']).default('off'),
  STRIPE_WEBHOOK_SECRET: z
    .string()
    .regex(/^whsec_\S+$/, "must be the endpoint's signing secret, whsec_…")
    .optional(),
  WEBHOOKS: z.enum(['on', 'off']).default('on'),
  WORKFLOW_BUNDLE: z.string().min(1).optional(),
  WEBHOOK_PORT: port.default(4343),
  WEBHOOK_HOST: z.string().min(1).default('127.0.0.1'),
  DIGEST_TO: z.string().email().default('refund-ops@durable-refunds.test'),
  SCHEDULE_TIME_ZONE: z.string().min(1).default('UTC'),
  SCHEDULES_FILE: z.string().min(1).optional(),
  /** Who may decide parked runs, overriding the policy's roles: `alice=operator,bob=operator+approver`. */
  /** off: payloads go to Temporal in plaintext. On (the default), they are encrypted with PAYLOAD_KEYS. */
  PAYLOAD_ENCRYPTION: z.enum(['on', 'off']).default('on'),
  /** `id:base64key,…`, newest first: the newest encrypts, every one decrypts. */
  PAYLOAD_KEYS: z.string().min(1).optional(),
  PAYLOAD_KEYS_FILE: z.string().min(1).optional(),
  /** reject (the default with encryption on): workers refuse a workflow's input, Signal, Update or Query sent in plaintext; allow: for a migration. */
  PAYLOAD_PLAINTEXT: z.enum(['reject', 'allow']).optional(),
  CODEC_PORT: port.default(8888),
  CODEC_HOST: z.string().min(1).default('127.0.0.1'),
  /** The Web UI origins the codec server answers (CORS); the local UI's by default. */
  CODEC_CORS_ORIGINS: z.string().min(1).optional(),
  /** When set, the codec server decodes only for requests bearing `Authorization: Bearer <token>`. */
  CODEC_AUTH_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** proxy: an authenticating proxy in front of the codec server checks who calls it (needed to listen off loopback without a token). */
  CODEC_AUTH: z.enum(['token', 'proxy']).optional(),
  /** The pools this worker process serves (comma-separated): workflows, effects, reconcile. */
  WORKER_POOLS: z
    .string()
    .transform((text, ctx) => {
      const pools = [
        ...new Set(
          text
            .split(',')
            .map((p) => p.trim())
            .filter(Boolean),
        ),
      ];
      const unknown = pools.filter((p) => !(WORKER_POOLS as readonly string[]).includes(p));
      if (pools.length === 0 || unknown.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `must list pools among ${WORKER_POOLS.join(', ')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}`,
        });
        return z.NEVER;
      }
      return pools as WorkerPool[];
    })
    .optional(),
  /** host:port of the worker's /healthz and /readyz (port 0: any free one, logged); unset: no health server. */
  HEALTH_ADDRESS: z
    .string()
    .transform((text, ctx) => {
      const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(text.trim());
      if (!m || Number(m[2]) > 65535) {
        ctx.addIssue({ code: 'custom', message: 'must be host:port, e.g. 0.0.0.0:9464 or [::]:9464 or 127.0.0.1:0' });
        return z.NEVER;
      }
      return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) };
    })
    .optional(),
  /** How long a SIGTERM's drain lets tasks in flight finish; unset: the policy's longest attempt (startToCloseMs). */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(3600_000).optional(),
  WORKER_WORKFLOW_SLOTS: z.coerce.number().int().min(1).max(10_000).default(40),
  WORKER_EFFECT_SLOTS: z.coerce.number().int().min(1).max(10_000).default(20),
  WORKER_RECONCILE_SLOTS: z.coerce.number().int().min(1).max(10_000).default(10),
  /** New refunds are refused while a task queue of the refunds has more tasks waiting than this; 0: never. */
  ADMISSION_MAX_BACKLOG: z.coerce.number().int().min(0).max(10_000_000).default(1000),
  DECIDERS: z
    .string()
    .transform((text, ctx) => {
      // name=role[+role][:public key], the key as `npm run decide -- keygen` prints it.
      const entries = text.split(',').map((entry) => /^([^=]*)=([^:]*)(?::(.*))?$/.exec(entry.trim()));
      const given = entries.filter((m) => m !== null);
      const roles = decisionsSchema.shape.roles.safeParse(
        Object.fromEntries(given.map(([, name, list]) => [name, list.split('+')])),
      );
      const keys = decisionsSchema.shape.keys.safeParse(
        Object.fromEntries(given.filter((m) => m[3] !== undefined).map(([, name, , key]) => [name, key])),
      );
      if (!roles.success || !keys.success || given.length !== entries.length) {
        ctx.addIssue({
          code: 'custom',
          message:
            'must be name=role[+role][:key],… with roles operator and approver and an Ed25519 public key in hex (npm run decide -- keygen), e.g. alice=operator:3b6a…,bob=operator+approver:9f1c…',
        });
        return z.NEVER;
      }
      return { roles: roles.data, keys: keys.data };
    })
    .optional(),
  /** allow: a decision without a signature is taken on its name alone. Local development only (the dev stack sets it, and says so). */
  DECISIONS_UNSIGNED: z.enum(['refuse', 'allow']).default('refuse'),
});

export type Config = ReturnType<typeof loadConfig>;

/** How long real Stripe keeps an idempotency key's response. */
const STRIPE_KEY_TTL_HOURS = 24;

const LOCAL_TEMPORAL = '127.0.0.1:7233';

/**
 * Where Temporal is, read the way the `temporal` CLI reads it (@temporalio/envconfig): the
 * profile TEMPORAL_PROFILE names (default "default") in TEMPORAL_CONFIG_FILE or the default
 * temporal.toml, overridden by TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY and the
 * TEMPORAL_TLS* variables. Nothing set: the local dev server.
 */
function temporalTarget(env: NodeJS.ProcessEnv) {
  let loaded: ReturnType<typeof loadClientConnectConfig>;
  try {
    loaded = loadClientConnectConfig({ profile: env.TEMPORAL_PROFILE, overrideEnvVars: env as Record<string, string> });
  } catch (err) {
    throw new Error(
      `invalid environment: Temporal client configuration (TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE): ${(err as Error).message}`,
      { cause: err },
    );
  }
  const connection: NativeConnectionOptions = {
    ...loaded.connectionOptions,
    address: loaded.connectionOptions.address ?? LOCAL_TEMPORAL,
  };
  const host = connection.address!.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  return {
    address: connection.address!,
    namespace: loaded.namespace ?? 'default',
    connection,
    profile: env.TEMPORAL_PROFILE ?? 'default',
    /** A server on this machine: the local stack's, which may use a key file of its own. */
    local: LOOPBACK.includes(host),
  };
}

/** The local Stripe server's endpoint secret: both ends are on this machine, so a fixed one is enough. */
export const LOCAL_WEBHOOK_SECRET = 'whsec_local_durable_refunds';
export const WEBHOOK_PATH = '/webhooks/stripe';
const LOOPBACK = ['127.0.0.1', 'localhost', '::1'];

/** A host on this machine: 127.0.0.0/8, localhost or ::1 (bracketed or not, as a URL's hostname has it). */
function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return LOOPBACK.includes(bare) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare);
}

/** How a URL names a server listening on `host`: one on every address is reached on loopback; an IPv6 address goes in brackets. */
export function urlHost(host: string): string {
  if (['0.0.0.0', '::'].includes(host)) return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/** A relay that is not on this machine gets TLS unless told otherwise: credentials and customers' addresses never cross a network in the clear. */
export function smtpTlsFor(url: string): 'off' | 'starttls' | 'implicit' {
  if (url.startsWith('smtps:')) return 'implicit';
  return LOOPBACK.includes(smtpHostOf(url)) ? 'off' : 'starttls';
}

function smtpHostOf(url: string): string {
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  if (!parsed || !['smtp:', 'smtps:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new Error(
      `invalid environment: SMTP_URL: "${url.replace(/\/\/[^@/]*@/, '//***@')}" is not a URL of the form smtp://host:port or smtps://host:465`,
    );
  }
  return parsed.hostname.replace(/^\[|\]$/g, '');
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid environment: ${problems}`);
  }
  const e = parsed.data;
  const liveKey = /^(sk|rk)_live_/.test(e.STRIPE_SECRET_KEY ?? '');
  if (liveKey && e.STRIPE_LIVE_MODE !== 'allow') {
    throw new Error(
      'invalid environment: STRIPE_SECRET_KEY: a live-mode key refunds real money; this process refuses it unless STRIPE_LIVE_MODE=allow ' +
        '(set it only where live refunds are meant to run, never in a shell or test environment)',
    );
  }
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
  if (!stripeLocal && e.OPERATION_SCOPE === undefined) {
    // Two environments sharing one Stripe account would otherwise derive the same keys and operation ids.
    throw new Error(
      'invalid environment: OPERATION_SCOPE: must name this environment (e.g. "staging") when refunds go to real Stripe',
    );
  }
  if (!stripeLocal && e.STRIPE_IDEMPOTENCY_TTL_HOURS > STRIPE_KEY_TTL_HOURS) {
    // A longer window would resend with the same key after Stripe forgot it, without reconciling first: a second refund.
    throw new Error(
      `invalid environment: STRIPE_IDEMPOTENCY_TTL_HOURS: Stripe keeps an idempotency key's response for ${STRIPE_KEY_TTL_HOURS} hours; ` +
        `with real Stripe this must be at most ${STRIPE_KEY_TTL_HOURS} (${e.STRIPE_IDEMPOTENCY_TTL_HOURS} given), and the worker trusts it a margin less`,
    );
  }
  let keys;
  try {
    keys = e.PAYLOAD_KEYS === undefined ? undefined : parseKeyring(e.PAYLOAD_KEYS, 'PAYLOAD_KEYS');
  } catch (err) {
    throw new Error(`invalid environment: ${(err as Error).message}`, { cause: err });
  }
  if (!LOOPBACK.includes(e.CODEC_HOST) && !e.CODEC_AUTH_TOKEN && e.CODEC_AUTH !== 'proxy') {
    throw new Error(
      `invalid environment: CODEC_HOST: the codec server decrypts for anyone who reaches it; on ${e.CODEC_HOST} it needs CODEC_AUTH_TOKEN, ` +
        'or CODEC_AUTH=proxy when an authenticating proxy in front of it checks every caller',
    );
  }
  // With encryption off every payload is plaintext: refusing it would refuse everything.
  if (e.PAYLOAD_ENCRYPTION === 'off' && e.PAYLOAD_PLAINTEXT === 'reject')
    throw new Error(
      'invalid environment: PAYLOAD_PLAINTEXT: reject needs PAYLOAD_ENCRYPTION=on (with encryption off every payload is plaintext)',
    );
  if (e.METRICS_PROMETHEUS_ADDRESS && e.METRICS_OTLP_URL) {
    throw new Error(
      'invalid environment: METRICS_OTLP_URL: the worker exports its metrics one way; set METRICS_PROMETHEUS_ADDRESS or METRICS_OTLP_URL, not both',
    );
  }
  const uiOrigins = [`http://localhost:${e.TEMPORAL_UI_PORT}`, `http://127.0.0.1:${e.TEMPORAL_UI_PORT}`];
  return {
    scope: e.OPERATION_SCOPE ?? 'local',
    encryption: {
      enabled: e.PAYLOAD_ENCRYPTION === 'on',
      keys,
      keysFile: e.PAYLOAD_KEYS_FILE,
      localKeysFile: path.join(e.DATA_DIR, 'payload-keys'),
      /** Whether workers take a workflow's own payload sent in plaintext: never by default, always when nothing is encrypted. */
      plaintext: e.PAYLOAD_PLAINTEXT ?? (e.PAYLOAD_ENCRYPTION === 'on' ? 'reject' : 'allow'),
    },
    codec: {
      port: e.CODEC_PORT,
      host: e.CODEC_HOST,
      endpoint: `http://${urlHost(e.CODEC_HOST)}:${e.CODEC_PORT}`,
      origins:
        e.CODEC_CORS_ORIGINS?.split(',')
          .map((o) => o.trim())
          .filter(Boolean) ?? uiOrigins,
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
            (!e.STRIPE_SECRET_KEY && LOOPBACK.includes(e.WEBHOOK_HOST) ? LOCAL_WEBHOOK_SECRET : undefined)),
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
      /** Unset: shutdownGraceMs (src/lifecycle/drain.ts) takes the policy's longest attempt. */
      shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    },
    admission: { maxBacklog: e.ADMISSION_MAX_BACKLOG },
    logLevel: e.LOG_LEVEL,
    tracing: { exporter: e.OTEL_TRACES_EXPORTER, serviceName: e.OTEL_SERVICE_NAME },
    metrics: {
      prometheusAddress: e.METRICS_PROMETHEUS_ADDRESS,
      otlpUrl: e.METRICS_OTLP_URL,
    },
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
    },
  };
}
