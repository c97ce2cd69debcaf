// One real stack per test file: a namespace of its own on the suite's Temporal dev server (or a
// server of its own when the file runs alone: test/helpers/temporal.ts), the local Stripe-compatible
// and SMTP servers with their fault APIs on, a SQLite store with store faults on, and a worker.
import type { DataConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection } from '@temporalio/worker';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Stripe from 'stripe';
import { randomUUID } from 'node:crypto';
import { createActivities, type RefundActivities } from '../../src/activities';
import { startToxiproxy, type Toxiproxy } from '../../tools/src/chaos/toxiproxy';
import { createMailTransport } from '../../src/activities/mail-transport';
import { httpMessageLog } from '../../src/activities/message-log';
import { createStripeClient } from '../../src/activities/stripe-client';
import { seedPaidOrder } from '../../tools/src/shop/orders';
import { stepsQuery, type RefundRunState, type RunSettings } from '../../src/contract';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import type { MailFaultSpec } from '../../tools/src/servers/mail-faults';
import type { MailServer } from '../../tools/src/servers/mail-server';
import type { StripeFaultInput } from '../../tools/src/servers/stripe/faults';
import type { LedgerEffect, RequestRow } from '../../tools/src/servers/stripe/store';
import type { StripeServerHooks } from '../../tools/src/servers/stripe-server';
import { proxyDependencies, startStandIns, type DependencyProxies } from '../../tools/src/stack/assembly';
import type { RefundLifecycle } from '../../tools/src/servers/stripe/resources';
import type { Order } from '../../src/domain/order';
import { openStore, type OrderStore, type StoreFaultKind, type StoreObserver } from '../../src/store';
import { freePort, recordHistory, testEnvironment } from './temporal';
import type { WorkerTracing } from '../../src/observability/tracing';
import { bundleRefundWorkflows, createRefundWorker, type RefundWorker } from '../../src/worker-pools';
import { runUntil } from './workers';
import { refundDataConverter } from '../../src/codec/data-converter';
import { newKeyEntry, parseKeyring } from '../../src/codec/keyring';
import { startCodecServer } from '../../src/codec/codec-server';
import { EncryptionCodec } from '../../src/codec/encryption-codec';
import type { EvidenceSources } from '../../src/inspect/facts';
import { TEST_POLICY } from './runs';

export interface HarnessOptions {
  /** Runs before the harness opens (so migrates) the store, with cliEnv's settings: an older release's worker, say. */
  beforeStore?: (cliEnv: NodeJS.ProcessEnv) => Promise<void>;
  /** How long the Stripe server keeps a key's response; the worker's dedupe window follows it. */
  keyTtlMs?: number;
  /** The Stripe client's request timeout. */
  requestTimeoutMs?: number;
  /** How long a new refund may be missing from the provider's list, as the worker assumes. */
  consistencyMs?: number;
  policy?: RecoveryPolicy;
  /** When the Stripe server settles pending refunds and fails pm_card_refundFail ones. */
  lifecycle?: Partial<RefundLifecycle>;
  /** Puts Toxiproxy between the workers and Stripe, SMTP and the Temporal frontend (the test's own clients go direct). */
  network?: boolean;
  /** Hooks into the Stripe server around each effect (e.g. to kill a worker process right after one). */
  stripeHooks?: StripeServerHooks;
  /** false: payloads not deflated by this code's processes (PAYLOAD_COMPRESSION=off), for a rollout beside a build that cannot inflate. */
  payloadCompression?: boolean;
  /** false: no worker in the test process (the test runs worker processes of its own). */
  inProcessWorker?: boolean;
  /** The order store's database; a SQLite file in the harness's directory unless given. */
  databaseUrl?: string;
  /** How long a store write waits for another's lock (SQLite's busy_timeout, PostgreSQL's lock_timeout); 200 ms unless given. */
  busyTimeoutMs?: number;
  /** Counts what the store sends (statements, commits, serialization retries), as the worker's metrics would. */
  storeObserver?: StoreObserver;
  /** The workers settle unknown hand-overs in the SMTP server's mailbox, as in a provider's message log (MAIL_LOG_URL). */
  messageLog?: boolean;
  /** The workers' tracing (observability tests); off unless given. */
  tracing?: WorkerTracing;
  /** A Temporal dev server of the file's own with its Web UI, which decodes through the harness's codec server (webUiUrl). */
  webUi?: boolean;
}

export interface Harness {
  env: TestWorkflowEnvironment;
  /** The file's own namespace on the suite's dev server: give it to every `temporal` CLI call. */
  namespace: string;
  stripe: Stripe;
  stripeUrl: string;
  mail: MailServer;
  store: OrderStore;
  /** The in-process worker, unless `inProcessWorker: false`. */
  worker: RefundWorker | undefined;
  /** The worker's activities, for workers a test builds itself. */
  activities: RefundActivities;
  /** The file's clients' data converter (payloads encrypted with payloadKeys). */
  dataConverter: DataConverter;
  /** Its workers': the same keys, and a workflow's own payloads sent in plaintext refused. */
  workerConverter: DataConverter;
  /** The workflow bundle every worker of the file runs. */
  workflowBundle: { code: string };
  settings: RunSettings;
  /** The payload keys (PAYLOAD_KEYS) the file's clients and workers encrypt with: one of the file's own. */
  payloadKeys: string;
  /** A codec server with that key, for the \`temporal\` CLI's --codec-endpoint: without it the CLI sees ciphertext. */
  codecUrl: string;
  /** With `webUi`: the Web UI's address (http://127.0.0.1:<port>). */
  webUiUrl?: string;
  /** A second worker on its own task queue whose activities are the real ones with some replaced, or built with other settings. */
  withWorker<T>(
    overrides: Partial<RefundActivities>,
    fn: (taskQueue: string) => Promise<T>,
    /** Other settings; `messageLog`: its workers settle unknown hand-overs in the mailbox (MAIL_LOG_URL). */
    settings?: Partial<RunSettings> & { messageLog?: boolean },
    taskQueue?: string,
    dataConverter?: DataConverter,
  ): Promise<T>;
  seedOrder(
    orderId: string,
    opts?: { paymentMethod?: string; customerEmail?: string; amount?: number },
  ): Promise<Order>;
  /** Effects the Stripe server really performed for a payment intent (its refunds). */
  ledger(paymentIntentId: string): Promise<LedgerEffect[]>;
  /** Every effect of the payment intent: its creation, its charge, its refunds. */
  effects(paymentIntentId: string): Promise<LedgerEffect[]>;
  /** Every request the Stripe server received, as it answered it. */
  requests(filter: { idempotencyKey?: string; paymentIntent?: string; path?: string }): Promise<RequestRow[]>;
  /** Messages the SMTP server really received, optionally for one Message-ID or recipient. */
  messages(filter?: {
    messageId?: string;
    to?: string;
  }): Promise<{ messageId: string; to: string[]; subject: string; receivedAt: string }[]>;
  /** With `network`: the proxies the workers reach their dependencies through. */
  toxiproxy?: Toxiproxy;
  proxies?: DependencyProxies;
  stripeFault(fault: StripeFaultInput): Promise<void>;
  /** Every read of the payment intent at the server fails (500): a run parks at its completion gate, the one step that lists its refunds. */
  failProviderReads(paymentIntentId: string): Promise<void>;
  /** The refund's scheduled change (a pending one settles, a pm_card_refundFail one fails) now, not at its delay. */
  settleRefund(refundId: string): Promise<void>;
  mailFault(fault: Partial<MailFaultSpec> & Pick<MailFaultSpec, 'kind'>): Promise<void>;
  storeFault(kind: StoreFaultKind, orderId: string, count?: number): Promise<void>;
  /** The run's state as its Query reports it. */
  state(workflowId: string): Promise<RefundRunState>;
  /** Where inspect reads the external evidence. */
  sources: EvidenceSources;
  /** The environment that points our CLIs at this stack. */
  cliEnv(): NodeJS.ProcessEnv;
  /** With RECORD_HISTORY=1, writes the run's history to test/histories/<name>.json for the replay test. */
  recordHistory(workflowId: string, name: string): Promise<void>;
  close(): Promise<void>;
}

export { completed, fewLookups, policyFileText, refund, stopped, TEST_POLICY, UNSIGNED_ENV } from './runs';

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-test-'));
  // Every payload of the file is encrypted, as in production: workers, clients and CLIs share the key.
  const payloadKeys = newKeyEntry();
  const keyring = parseKeyring(payloadKeys, 'harness');
  const compress = options.payloadCompression ?? true;
  const dataConverter = refundDataConverter(keyring, { compress });
  // The suite's shared dev server, in a namespace of this file's own (a file run alone starts its own server);
  // with the Web UI, a server of the file's own, started after the codec server its UI decodes through.
  const uiPort = options.webUi ? await freePort() : undefined;
  const webUiUrl = uiPort ? `http://127.0.0.1:${uiPort}` : undefined;
  const origins = uiPort ? [webUiUrl!, `http://localhost:${uiPort}`] : [];
  const codecFor = (namespace: string) =>
    startCodecServer({ codec: new EncryptionCodec(keyring, { compress }), namespace, origins, port: 0 });
  const uiCodecServer = uiPort ? await codecFor('default') : undefined;
  const env = await testEnvironment(
    { dataConverter },
    uiCodecServer && { port: uiPort!, codecEndpoint: uiCodecServer.url },
  );
  const namespace = env.namespace ?? 'default';
  const codecServer = uiCodecServer ?? (await codecFor(namespace));
  // Its workers refuse a workflow's own payloads sent in plaintext, as production's do (PAYLOAD_PLAINTEXT=reject).
  const workerConverter = refundDataConverter(keyring, {
    compress,
    refusePlaintext: { codecEndpoint: codecServer.url },
  });
  const keyTtlMs = options.keyTtlMs ?? 24 * 3600_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 2000;
  const standIns = await startStandIns(dir, {
    stripe: {
      port: 0,
      idempotencyTtlMs: keyTtlMs,
      faults: true,
      lifecycle: options.lifecycle,
      hooks: options.stripeHooks,
    },
    mail: { smtpPort: 0, apiPort: 0, faultApi: true },
  });
  const { stripe: stripeServer, mail } = standIns;
  const databaseUrl = options.databaseUrl ?? `sqlite:${path.join(dir, 'orders.db')}`;
  const cliEnv = () => ({
    ...process.env,
    TEMPORAL_ADDRESS: env.address,
    TEMPORAL_NAMESPACE: namespace,
    DATABASE_URL: databaseUrl,
    OPERATION_SCOPE: 'test',
    PAYLOAD_KEYS: payloadKeys,
    PAYLOAD_COMPRESSION: compress ? 'on' : 'off',
    STRIPE_API_BASE: stripeServer.url,
    SMTP_PORT: String(mail.smtpPort),
    MAILBOX_PORT: String(new URL(mail.apiUrl).port),
  });
  await options.beforeStore?.(cliEnv());
  const store = await openStore(databaseUrl, {
    faults: true,
    busyTimeoutMs: options.busyTimeoutMs ?? 200,
    observer: options.storeObserver,
  });
  const stripe = createStripeClient({ secretKey: 'sk_test_harness', apiBase: stripeServer.url, requestTimeoutMs });
  const toxiproxy = options.network ? await startToxiproxy() : undefined;
  const proxied =
    toxiproxy &&
    (await proxyDependencies(toxiproxy, {
      stripeUrl: stripeServer.url,
      smtpPort: mail.smtpPort,
      temporalAddress: env.address,
    }));
  const workerStripe = proxied
    ? createStripeClient({ secretKey: 'sk_test_harness', apiBase: `http://${proxied.stripe.listen}`, requestTimeoutMs })
    : stripe;
  const transport = createMailTransport(proxied ? `smtp://${proxied.smtp.listen}` : mail.smtpUrl);
  const connection = proxied
    ? await NativeConnection.connect({ address: proxied.temporal.listen })
    : env.nativeConnection;
  const settings: RunSettings = {
    scope: 'test',
    policy: options.policy ?? TEST_POLICY,
    provider: { dedupeWindowMs: keyTtlMs, consistencyMs: options.consistencyMs ?? 300, requestTimeoutMs },
  };
  const build = (s: RunSettings, messageLog = options.messageLog) =>
    createActivities({
      stripe: workerStripe,
      store,
      mail: transport,
      mailFrom: 'refunds@test.local',
      ...(messageLog && { messageLog: httpMessageLog({ url: mail.apiUrl, consistencyMs: 300 }) }),
      settings: s,
      temporal: env.client,
      digestTo: 'ops@test.local',
    });
  const activities = build(settings);
  // Bundled once per file: every worker of the file runs the same workflow code.
  // (test/global-setup.ts bundles it once per `npm test`; a file run alone bundles its own.)
  const bundled = process.env.TEST_WORKFLOW_BUNDLE;
  const workflowBundle = { code: bundled ? fs.readFileSync(bundled, 'utf8') : await bundleRefundWorkflows() };
  const worker =
    options.inProcessWorker === false
      ? undefined
      : await createRefundWorker({
          connection,
          namespace,
          activities,
          workflowBundle,
          dataConverter: workerConverter,
          tracing: options.tracing,
        });
  const running = worker?.run();

  const getJson = async <T>(url: string): Promise<T> => {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`${url}: ${res.status}`);
    return (await res.json()) as T;
  };
  const post = async (url: string, body: unknown) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  };

  const effects = async (paymentIntentId: string) =>
    (await getJson<{ effects: LedgerEffect[] }>(`${stripeServer.url}/_ledger?payment_intent=${paymentIntentId}`))
      .effects;
  return {
    env,
    namespace,
    stripe,
    stripeUrl: stripeServer.url,
    mail,
    store,
    worker,
    activities,
    dataConverter,
    workerConverter,
    workflowBundle,
    settings,
    payloadKeys,
    codecUrl: codecServer.url,
    webUiUrl,
    async withWorker(overrides, fn, other, queue, converter) {
      const taskQueue = queue ?? `refunds-${randomUUID()}`;
      const w = await createRefundWorker({
        connection,
        namespace,
        taskQueue,
        workflowBundle,
        dataConverter: converter ?? workerConverter,
        tracing: options.tracing,
        activities: withoutFirstLook(
          { ...(other ? build({ ...settings, ...other }, other.messageLog) : activities), ...overrides },
          overrides,
        ),
      });
      return runUntil(w, fn(taskQueue));
    },
    async seedOrder(orderId, opts = {}) {
      return seedPaidOrder(
        stripe,
        store,
        {
          orderId,
          amount: opts.amount ?? 5000,
          currency: 'usd',
          customerEmail: opts.customerEmail ?? `${orderId}@example.test`,
        },
        opts.paymentMethod,
      );
    },
    async ledger(paymentIntentId) {
      return (await effects(paymentIntentId)).filter((e) => e.type === 'refund.created');
    },
    effects,
    async requests(filter) {
      const q = new URLSearchParams();
      if (filter.idempotencyKey) q.set('idempotency_key', filter.idempotencyKey);
      if (filter.paymentIntent) q.set('payment_intent', filter.paymentIntent);
      if (filter.path) q.set('path', filter.path);
      return (await getJson<{ requests: RequestRow[] }>(`${stripeServer.url}/_requests?${q}`)).requests;
    },
    async messages(filter = {}) {
      const q = new URLSearchParams();
      if (filter.messageId) q.set('message_id', filter.messageId);
      if (filter.to) q.set('to', filter.to);
      return (await getJson<{ messages: Awaited<ReturnType<Harness['messages']>> }>(`${mail.apiUrl}/messages?${q}`))
        .messages;
    },
    toxiproxy,
    ...(proxied && { proxies: proxied }),
    stripeFault: (fault) => post(`${stripeServer.url}/_faults`, fault),
    failProviderReads: (paymentIntent) =>
      post(`${stripeServer.url}/_faults`, {
        kind: 'server_error',
        status: 500,
        match: { method: 'GET', paymentIntent },
        count: 1000,
      }),
    settleRefund: (refundId) => post(`${stripeServer.url}/_refunds/${refundId}/settle`, {}),
    mailFault: (fault) => post(`${mail.apiUrl}/_faults`, fault),
    async storeFault(kind, orderId, count = 1) {
      await store.faults.add({ kind, orderId, count });
    },
    state: (workflowId) => env.client.workflow.getHandle(workflowId).query(stepsQuery),
    sources: { store, stripe, ledgerUrl: stripeServer.url, mailboxUrl: mail.apiUrl },
    cliEnv,
    recordHistory: (workflowId, name) => recordHistory(env, workflowId, name, codecServer.url),
    async close() {
      worker?.shutdown();
      await running;
      transport.close();
      await store.close();
      await standIns.close();
      if (proxied) await connection.close();
      await toxiproxy?.close();
      await codecServer.close();
      await env.teardown();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An override of the gate's activity stands for each of its looks: the notice's activity then makes no first look. */
function withoutFirstLook<A extends Record<string, unknown>>(acts: A, overrides: object): A {
  if (!('checkCompletion' in overrides) || 'sendRefundNotice' in overrides) return acts;
  const send = acts.sendRefundNotice as (input: object) => Promise<unknown>;
  return { ...acts, sendRefundNotice: (input: object) => send({ ...input, read: undefined }) };
}
