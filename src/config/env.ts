// The environment's settings as the worker, the clients and the CLIs read them: each one's name, type,
// default and what it refuses. loadConfig (index.ts) checks them together and shapes them.
import path from 'node:path';
import { z } from 'zod';
import { CHECKOUT_REFUND_SCOPE, SCOPE_PATTERN, TASK_QUEUE, WORKER_POOLS, type WorkerPool } from '../contract';
import { decisionsSchema } from '../reliability/policy-schema';

export const PROJECT_ROOT = path.resolve(__dirname, '..', '..');

const port = z.coerce.number().int().min(1).max(65535);
const matching = (pattern: RegExp, message: string) => z.string().regex(pattern, message);
/** A setting whose text `read` turns into its value, or refuses with a message. */
const readText = <T>(read: (text: string, refuse: (message: string) => never) => T) =>
  z.string().transform((text, ctx) =>
    read(text, (message) => {
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    }),
  );

// Here, not beside the logger and the tracer: reading the configuration must not load pino or the OpenTelemetry SDK.
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];
const TRACE_EXPORTERS = ['none', 'console', 'otlp'] as const;
export type TraceExporter = (typeof TRACE_EXPORTERS)[number];

/**
 * Where the local stack (tools/) runs its Temporal Web UI and its Stripe and SMTP stand-ins. The
 * product reads them only for defaults: the stand-ins' URLs when no provider is configured, and the
 * local Web UI as the codec server's origin. The stand-ins' own settings are tools/src/config.ts's.
 */
export const LOCAL_PORTS = { temporalUi: 8233, stripe: 4242, smtp: 2525, mailbox: 8025 } as const;

/** Concurrent tasks per pool in one process: workflow tasks, and activities of each pool. */
export const DEFAULT_SLOTS: Record<WorkerPool, number> = { workflows: 40, effects: 20, reconcile: 10 };
const slots = (pool: WorkerPool) => z.coerce.number().int().min(1).max(10_000).default(DEFAULT_SLOTS[pool]);

export const envSchema = z.object({
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
  METRICS_PROMETHEUS_ADDRESS: matching(/^\S+:\d{1,5}$/, 'must be host:port, e.g. 0.0.0.0:9464').optional(),
  /** An OpenTelemetry collector the worker pushes its metrics to: OTLP/HTTP when the URL ends in /v1/metrics, else OTLP/gRPC. */
  METRICS_OTLP_URL: matching(/^(grpc|http)s?:\/\/\S+$/, 'must be a grpc(s):// or http(s):// URL').optional(),
  TASK_QUEUE: matching(/^[A-Za-z0-9_.-]{1,200}$/, 'must be 1-200 letters, digits, ".", "_" or "-"').default(TASK_QUEUE),
  MAIL_FROM: z.string().email().default('refunds@durable-refunds.test'),
  /** The mail provider's log of accepted messages, searched by Message-ID; unset: an unknown hand-over goes to a person. */
  MAIL_LOG_URL: z.string().url().optional(),
  /** How long after a send is off the wire the log may still not show it (its lag, and a relay still taking it). */
  MAIL_LOG_CONSISTENCY_MS: z.coerce.number().int().min(0).max(3600_000).default(5000),
  /** Sent to the log as a bearer token. */
  MAIL_LOG_TOKEN: z.string().min(1).optional(),
  OPERATION_SCOPE: z
    .string()
    .regex(SCOPE_PATTERN, 'must be 1-32 lowercase letters, digits, "_" or "-"')
    .refine((scope) => scope !== CHECKOUT_REFUND_SCOPE, `"${CHECKOUT_REFUND_SCOPE}" is the scope of checkouts' refunds`)
    .optional(),
  RECOVERY_POLICY_FILE: z.string().min(1).optional(),
  STRIPE_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  STRIPE_LIST_CONSISTENCY_MS: z.coerce.number().int().min(0).max(3600_000).default(10_000),
  FAULT_INJECTION: z.enum(['on', 'off']).default('off'),
  STRIPE_WEBHOOK_SECRET: matching(/^whsec_\S+$/, "must be the endpoint's signing secret, whsec_…").optional(),
  WEBHOOKS: z.enum(['on', 'off']).default('on'),
  WORKFLOW_BUNDLE: z.string().min(1).optional(),
  WEBHOOK_PORT: port.default(4343),
  WEBHOOK_HOST: z.string().min(1).default('127.0.0.1'),
  DIGEST_TO: z.string().email().default('refund-ops@durable-refunds.test'),
  SCHEDULE_TIME_ZONE: z.string().min(1).default('UTC'),
  SCHEDULES_FILE: z.string().min(1).optional(),
  /** off: payloads go to Temporal in plaintext. On (the default), they are encrypted with PAYLOAD_KEYS. */
  PAYLOAD_ENCRYPTION: z.enum(['on', 'off']).default('on'),
  /** `id:base64key,…`, newest first: the newest encrypts, every one decrypts. */
  PAYLOAD_KEYS: z.string().min(1).optional(),
  /** on (the default): each encrypted payload is deflated first; off while workers of an earlier build, which cannot inflate them, still run. */
  PAYLOAD_COMPRESSION: z.enum(['on', 'off']).default('on'),
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
  WORKER_POOLS: readText((text, refuse) => {
    const pools = [...new Set(text.split(',').map((p) => p.trim()))].filter(Boolean);
    const unknown = pools.filter((p) => !(WORKER_POOLS as readonly string[]).includes(p));
    if (pools.length === 0 || unknown.length > 0)
      return refuse(
        `must list pools among ${WORKER_POOLS.join(', ')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}`,
      );
    return pools as WorkerPool[];
  }).optional(),
  /** host:port of the worker's /healthz and /readyz (port 0: any free one, logged); unset: no health server. */
  HEALTH_ADDRESS: readText((text, refuse) => {
    const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(text.trim());
    if (!m || Number(m[2]) > 65535) return refuse('must be host:port, e.g. 0.0.0.0:9464 or [::]:9464 or 127.0.0.1:0');
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) };
  }).optional(),
  /** on: the worker polls as a Worker Deployment Version, and a new build takes runs once promoted (docs/production.md, "Rolling out a new build"). */
  WORKER_VERSIONING: z.enum(['on', 'off']).default('off'),
  /** The Worker Deployment the worker's builds belong to; the package's name unless given. Temporal refuses "." and ":" in it. */
  WORKER_DEPLOYMENT_NAME: matching(/^[A-Za-z0-9_-]{1,100}$/, 'must be 1-100 letters, digits, "_" or "-"').optional(),
  /** This build's id; `<package version>-<hash of the workflow bundle>` unless given. */
  WORKER_BUILD_ID: matching(
    /^[A-Za-z0-9_.+-]{1,100}$/,
    'must be 1-100 letters, digits, ".", "_", "+" or "-"',
  ).optional(),
  /** How long a SIGTERM's drain lets tasks in flight finish; unset: the policy's longest attempt (startToCloseMs). */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(3600_000).optional(),
  /** How long a run's next workflow task waits for the worker that has it cached before any worker takes it (the SDK's 10 s). */
  STICKY_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  WORKER_WORKFLOW_SLOTS: slots('workflows'),
  WORKER_EFFECT_SLOTS: slots('effects'),
  WORKER_RECONCILE_SLOTS: slots('reconcile'),
  /** New refunds are refused while a task queue of the refunds has more tasks waiting than this; 0: never. */
  ADMISSION_MAX_BACKLOG: z.coerce.number().int().min(0).max(10_000_000).default(1000),
  /** Who may decide parked runs, overriding the policy's roles: `alice=operator,bob=operator+approver`. */
  DECIDERS: readText((text, refuse) => {
    // name=role[+role][:public key], the key as `npm run decide -- keygen` prints it.
    const entries = text.split(',').map((entry) => /^([^=]*)=([^:]*)(?::(.*))?$/.exec(entry.trim()));
    const given = entries.filter((m) => m !== null);
    const roles = decisionsSchema.shape.roles.safeParse(
      Object.fromEntries(given.map(([, name, list]) => [name, list.split('+')])),
    );
    const keys = decisionsSchema.shape.keys.safeParse(
      Object.fromEntries(given.filter((m) => m[3] !== undefined).map(([, name, , key]) => [name, key])),
    );
    if (!roles.success || !keys.success || given.length !== entries.length)
      return refuse(
        'must be name=role[+role][:key],… with roles operator and approver and an Ed25519 public key in hex (npm run decide -- keygen), e.g. alice=operator:3b6a…,bob=operator+approver:9f1c…',
      );
    return { roles: roles.data, keys: keys.data };
  }).optional(),
  /** allow: a decision without a signature is taken on its name alone. Local development only (the dev stack sets it, and says so). */
  DECISIONS_UNSIGNED: z.enum(['refuse', 'allow']).default('refuse'),
});
