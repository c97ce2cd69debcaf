// The side-by-side part of the benchmark: the bare, project and naive variants run in turns
// (ABCABC…) on one stack, at each concurrency, with no faults and with the same fault schedule,
// and everything is counted where it lands: the Stripe server's ledger and request log, the SMTP
// server's commands and mailbox, Temporal's histories, the worker processes' /proc.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { Client, type WorkflowHandle } from '@temporalio/client';
import { setMaxListeners } from 'node:events';
import path from 'node:path';
import fs from 'node:fs';
import type { temporal } from '@temporalio/proto';
import { outcomeOf } from '../../../src/client/outcome';
import { startRefund } from '../../../src/client/refunds';
import { seedPaidOrder } from '../shop/orders';
import { PROJECT_ROOT } from '../../../src/config';
import { FAILURE_CONVERTER_PATH, PAYLOAD_CONVERTER_PATH } from '../../../src/codec/data-converter';
import { openStore, type OrderStore } from '../../../src/store';
import { startWorkerProcess, type WorkerProcess } from '../chaos/worker-process';
import { freePort } from '../stack/processes';
import { METRICS } from '../../../src/observability/metrics';
import type { ChaosStack } from '../chaos/chaos-stack';
import { runDetails, runSummary, SEARCH_ATTRIBUTES, TASK_QUEUE, type RefundWorkflow } from '../../../src/contract';
import { parseRefundRequest } from '../../../src/domain/refund-request';
import type { BareRefundInput } from './activities';
import {
  historySize,
  mean,
  noThreadCpu,
  percentiles,
  sampleProcess,
  THREAD_GROUPS,
  threadCpu,
  type Percentiles,
  type ThreadCpu,
} from './measure';

export const VARIANTS = ['bare', 'platform', 'project', 'naive'] as const;
/** `baseline`: the refund workflow of an earlier build (`--baseline <checkout>`), beside this one's. */
export type Variant = (typeof VARIANTS)[number] | 'baseline';
export type FaultMode = 'none' | 'faults';

export const BENCH_QUEUES = {
  bare: 'bench-bare',
  platform: 'bench-platform',
  naive: 'bench-naive',
  baseline: 'bench-baseline',
} as const;

/** How the report names a variant. */
export const variantName = (v: Variant) => (v === 'platform' ? 'bare+platform' : v);

export interface MatrixOptions {
  concurrency: number[];
  /** Runs per variant and turn at concurrency 1; a turn at concurrency c runs max(runs, 4c): its first and last waves ramp up and down, and with 2c (or a cell's 4c split into turns) a turn measured little else. */
  runs: number;
  /**
   * Turns of each cell without faults (ABC, BCA, CAB…), each of a turn's runs. A cell with faults runs in one
   * turn: each turn of a segment gets a worker kill of its own, and a kill costs its runs seconds.
   */
  rounds: number;
  faultModes: FaultMode[];
  /** A run not settled this long after its segment began is counted as not settled. */
  segmentTimeoutMs: number;
}

export const runsAt = (opts: Pick<MatrixOptions, 'runs'>, concurrency: number) => Math.max(opts.runs, 4 * concurrency);

/** The faults each segment with faults gets, as shares of its runs (at least one of each): the same for every variant. */
export const FAULT_SCHEDULE = {
  lostAnswers: 0.1,
  rateLimits: 0.05,
  resets: 0.05,
  smtpTransient: 0.05,
  /** The variant's worker is SIGKILLed (and replaced) once half the segment's runs have started. */
  workerKills: 1,
} as const;

export interface CellResult {
  variant: Variant;
  faults: FaultMode;
  concurrency: number;
  runs: number;
  completed: number;
  /** Runs that ended any other way, by how (parked, failed, not settled…). */
  other: Record<string, number>;
  durationMs: number;
  /** Completed runs per second of the segments' wall time. */
  throughput: number;
  latencyMs: Percentiles;
  history: { eventsPerRun: number; bytesPerRun: number; maxEvents: number };
  requests: {
    /** POST /v1/refunds: requests that can make a refund. */
    stripeCreates: number;
    /** GET /v1/refunds…: lookups (reconciliation, the completion gate). */
    stripeReads: number;
    /** RCPT TO commands for the runs' recipients: tries to deliver an email. */
    smtpTries: number;
    /** Refund creates and delivery tries per logical effect (one refund and one email per run). */
    effectRequestsPerEffect: number;
    /** With the lookups too. */
    allRequestsPerEffect: number;
  };
  /** Effects that landed more than once: extra refunds in the Stripe ledger, extra emails in the mailbox. */
  duplicates: { refunds: number; emails: number };
  /** Orders whose refunded amount is not what was asked (counted in the order store). */
  wrongOrders: number;
  /** Faults that fired, counted by the servers (and the kills we made). */
  injected: { lostAnswers: number; rateLimits: number; resets: number; smtpTransient: number; workerKills: number };
  /** threadsMsPerRun: its CPU per run by thread group; `other` is the rest of cpuMsPerRun (exited threads too). */
  worker: { cpuMs: number; cpuMsPerRun: number; peakRssBytes: number; threadsMsPerRun: ThreadCpu };
  /** What the variant's worker sent its store per run, as its own metrics counted it (refunds_store_*_total). */
  store: { statementsPerRun: number; commitsPerRun: number };
  /**
   * CPU time per run of the rest of the stack while the variant's segments ran: the Temporal dev
   * server, Toxiproxy, and the bench's own process (its Temporal client, the Stripe and SMTP
   * servers; the evidence is read after the segments). On a machine this small, the sum with the
   * worker's is what decides throughput once the machine is busy.
   */
  stackCpuMsPerRun: { temporal: number; toxiproxy: number; benchProcess: number };
}

/** CPU per run by thread group, `other` what the named groups leave of the process's whole (threads that exited too). */
function perRunByThread(threads: ThreadCpu, cpuMs: number, runs: number): ThreadCpu {
  const named = THREAD_GROUPS.filter((g) => g !== 'other');
  const rest = cpuMs - named.reduce((sum, g) => sum + threads[g], 0);
  return Object.fromEntries([
    ...named.map((g) => [g, threads[g] / runs]),
    ['other', Math.max(0, rest) / runs],
  ]) as ThreadCpu;
}

/** CPU time per run of every process the variant kept busy: its worker and the rest of the stack. */
export const machineCpuMsPerRun = (c: CellResult) =>
  c.worker.cpuMsPerRun + c.stackCpuMsPerRun.temporal + c.stackCpuMsPerRun.toxiproxy + c.stackCpuMsPerRun.benchProcess;

/** CPU time so far of the processes around the workers: a segment's share is the difference. */
function stackCpu(stack: ChaosStack) {
  const of = (pid: number | undefined) => (pid === undefined ? 0 : (sampleProcess(pid)?.cpuMs ?? 0));
  const own = process.cpuUsage();
  return {
    temporal: of(stack.pids.temporal),
    toxiproxy: of(stack.pids.toxiproxy),
    benchProcess: (own.user + own.system) / 1000,
  };
}

export interface StoreCounts {
  statements: number;
  commits: number;
}

/** The store counters a worker's /metrics shows so far, every series of each summed. */
export function storeCountsIn(exposition: string): StoreCounts {
  const sum = (name: string) =>
    exposition
      .split('\n')
      .filter((line) => line.startsWith(`${name} `) || line.startsWith(`${name}{`))
      .reduce((total, line) => total + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  return { statements: sum(METRICS.storeStatements.name), commits: sum(METRICS.storeCommits.name) };
}

/** A worker process and where it serves its metrics. */
interface MeteredWorker {
  proc: WorkerProcess;
  metricsUrl: string;
}

/** Starts a worker process that serves its metrics on a port of its own (every variant alike: the same exporter's cost). */
async function startMetered(env: NodeJS.ProcessEnv, script?: string): Promise<MeteredWorker> {
  const address = `127.0.0.1:${await freePort()}`;
  const proc = await startWorkerProcess({ ...env, METRICS_PROMETHEUS_ADDRESS: address }, 60_000, script);
  return { proc, metricsUrl: `http://${address}/metrics` };
}

/** One variant's worker process, replaced when killed, with the CPU time and store counts of every process it had. */
class VariantWorker {
  private deadCpuMs = 0;
  private deadThreads = noThreadCpu();
  private deadStore: StoreCounts = { statements: 0, commits: 0 };
  peakRssBytes = 0;
  constructor(
    private current: MeteredWorker,
    private readonly restart: () => Promise<MeteredWorker>,
  ) {}
  private get proc(): WorkerProcess {
    return this.current.proc;
  }
  /** The store's statements and commits of this variant's workers so far (a killed one's as read just before). */
  async storeCounts(): Promise<StoreCounts> {
    const now = storeCountsIn(await (await fetch(this.current.metricsUrl)).text());
    return {
      statements: this.deadStore.statements + now.statements,
      commits: this.deadStore.commits + now.commits,
    };
  }
  cpuMs(): number {
    const s = sampleProcess(this.proc.pid);
    if (s) this.peakRssBytes = Math.max(this.peakRssBytes, s.peakRssBytes);
    return this.deadCpuMs + (s?.cpuMs ?? 0);
  }
  /** CPU time so far by thread group, of this variant's workers (a killed one's as read just before). */
  threadCpu(): ThreadCpu {
    const now = threadCpu(this.proc.pid) ?? noThreadCpu();
    return Object.fromEntries(THREAD_GROUPS.map((g) => [g, this.deadThreads[g] + now[g]])) as ThreadCpu;
  }
  async kill(): Promise<void> {
    this.deadStore = await this.storeCounts();
    this.deadThreads = this.threadCpu();
    const s = sampleProcess(this.proc.pid);
    await this.proc.kill();
    if (s) {
      this.deadCpuMs += s.cpuMs;
      this.peakRssBytes = Math.max(this.peakRssBytes, s.peakRssBytes);
    }
    this.current = await this.restart();
  }
  async stop(): Promise<void> {
    this.cpuMs();
    await this.proc.stop().catch(() => this.proc.kill());
  }
}

export interface BenchStackWorkers {
  /** The variants measured, in turn order. */
  variants: Variant[];
  workers: Partial<Record<Variant, VariantWorker>>;
  /** Where each variant's orders are kept: the stack's store, the baseline's its own. */
  stores: Partial<Record<Variant, OrderStore>>;
  /** RCPT TO commands the SMTP server saw, by recipient. */
  smtpTries: Map<string, number>;
  stop(): Promise<void>;
}

/**
 * The bare, bare+platform and naive workflows, bundled apart from the refund workflows. For bare+platform, with the
 * project's payload and failure converters in the sandbox as its workers have them (a prebuilt bundle carries them).
 */
async function bundleBenchWorkflows(dir: string, platform: boolean): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./workflows'),
    logger: new DefaultLogger('WARN'),
    ...(platform && { payloadConverterPath: PAYLOAD_CONVERTER_PATH, failureConverterPath: FAILURE_CONVERTER_PATH }),
  });
  const file = path.join(dir, platform ? 'bench-platform-workflows.js' : 'bench-workflows.js');
  fs.writeFileSync(file, code);
  return file;
}

/**
 * Starts one worker process per variant on the stack, each on its own task queue. A baseline checkout's worker
 * gets a store of its own, created by that build and only then migrated by this one (as a rollout does it): an
 * earlier build refuses to start on a store that holds migrations it does not know.
 */
export async function startVariantWorkers(
  stack: ChaosStack,
  smtpTries: Map<string, number>,
  baseline?: string,
): Promise<BenchStackWorkers> {
  const bundles = {
    plain: await bundleBenchWorkflows(stack.dir, false),
    platform: await bundleBenchWorkflows(stack.dir, true),
  };
  const script = path.join(PROJECT_ROOT, 'tools', 'src', 'bench', 'worker.ts');
  const project = () => startMetered(stack.env);
  const plain =
    (queue: string, platform = false) =>
    () =>
      startMetered(
        {
          ...stack.env,
          BENCH_TASK_QUEUE: queue,
          BENCH_WORKFLOW_BUNDLE: platform ? bundles.platform : bundles.plain,
          BENCH_PLATFORM: platform ? 'on' : 'off',
        },
        script,
      );
  const starts: Partial<Record<Variant, () => Promise<MeteredWorker>>> = {
    bare: plain(BENCH_QUEUES.bare),
    platform: plain(BENCH_QUEUES.platform, true),
    project,
    naive: plain(BENCH_QUEUES.naive),
  };
  const stores: BenchStackWorkers['stores'] = Object.fromEntries(VARIANTS.map((v) => [v, stack.store]));
  const baselineDb = `sqlite:${path.join(stack.dir, 'baseline.db')}`;
  if (baseline) {
    const env: NodeJS.ProcessEnv = { ...stack.env, DATABASE_URL: baselineDb, TASK_QUEUE: BENCH_QUEUES.baseline };
    // Its own workflow code, bundled by its worker at start.
    delete env.WORKFLOW_BUNDLE;
    starts.baseline = () => startMetered(env, path.join(baseline, 'src', 'worker.ts'));
  }
  const variants = Object.keys(starts) as Variant[];
  const workers: BenchStackWorkers['workers'] = {};
  for (const v of variants) workers[v] = new VariantWorker(await starts[v]!(), starts[v]!);
  if (baseline) stores.baseline = await openStore(baselineDb);
  return {
    variants,
    workers,
    stores,
    smtpTries,
    async stop() {
      await Promise.all(variants.map((v) => workers[v]!.stop()));
      await stores.baseline?.close();
    },
  };
}

interface RunRecord {
  orderId: string;
  paymentIntentId: string;
  email: string;
  amount: number;
  workflowId: string;
  outcome: string;
  latencyMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function getJson<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, init);
  if (!res.ok) throw new Error(`${init?.method ?? 'GET'} ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

const post = (url: string, body: unknown) =>
  getJson(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/**
 * Arms a segment's faults at the servers, sized to its runs and spread through them: each kind fires on
 * every k-th request it matches, as a provider's error rate would, not on the first ones in a row. Armed
 * as the first requests, they were a burst of some twenty failures in a row at concurrency 50: an outage,
 * which the circuit breaker answers by opening, and then each probe met the next fault still armed, since
 * these faults wait for requests where a real outage ends in time. `createPath`: the requests that make the effect
 * (a refund's; a checkout's charge is a payment intent's).
 */
export async function armFaults(stack: ChaosStack, runs: number, createPath = '/v1/refunds'): Promise<void> {
  const spread = (share: number) => {
    const count = Math.max(1, Math.round(runs * share));
    return { count, every: Math.max(1, Math.floor(runs / count)) };
  };
  const creates = { method: 'POST', path: createPath };
  await post(`${stack.stripeUrl}/_faults`, {
    kind: 'drop_after_commit',
    match: creates,
    ...spread(FAULT_SCHEDULE.lostAnswers),
  });
  await post(`${stack.stripeUrl}/_faults`, {
    kind: 'rate_limit',
    retryAfterSeconds: 1,
    match: creates,
    ...spread(FAULT_SCHEDULE.rateLimits),
  });
  await post(`${stack.stripeUrl}/_faults`, {
    kind: 'fail_before_commit',
    match: creates,
    ...spread(FAULT_SCHEDULE.resets),
  });
  await post(`${stack.mail.apiUrl}/_faults`, {
    kind: 'reply',
    stage: 'rcpt',
    code: 451,
    message: '4.3.0 try again (bench)',
    ...spread(FAULT_SCHEDULE.smtpTransient),
  });
}

/** What fired of the armed faults; then clears them. */
export async function disarmFaults(stack: ChaosStack): Promise<Omit<CellResult['injected'], 'workerKills'>> {
  const stripe = (await getJson<{ faults: { kind: string; hits: number }[] }>(`${stack.stripeUrl}/_faults`)).faults;
  const mail = (await getJson<{ faults: { hits: number }[] }>(`${stack.mail.apiUrl}/_faults`)).faults;
  const hits = (kind: string) => stripe.filter((f) => f.kind === kind).reduce((a, f) => a + f.hits, 0);
  await fetch(`${stack.stripeUrl}/_faults`, { method: 'DELETE' });
  await fetch(`${stack.mail.apiUrl}/_faults`, { method: 'DELETE' });
  return {
    lostAnswers: hits('drop_after_commit'),
    rateLimits: hits('rate_limit'),
    resets: hits('fail_before_commit'),
    smtpTransient: mail.reduce((a, f) => a + f.hits, 0),
  };
}

const plainClients = new WeakMap<ChaosStack, Client>();
/** A client on the stack's connection with the default data converter, as bare Temporal has it. */
function plainClient(stack: ChaosStack): Client {
  let client = plainClients.get(stack);
  if (!client)
    plainClients.set(stack, (client = new Client({ connection: stack.client.connection, namespace: 'default' })));
  return client;
}

/** A bare+platform run, started as the refund CLI starts a refund: encrypted, findable and summarised from the start. */
async function startPlatformRun(stack: ChaosStack, input: BareRefundInput) {
  const workflowId = `bench-platform-${input.orderId}`;
  const { orderId, amount, currency } = input;
  const request = parseRefundRequest({ orderId, amount, currency, requestedBy: 'bench' });
  const handle = await stack.client.workflow.start('platformRefundWorkflow', {
    taskQueue: BENCH_QUEUES.platform,
    workflowId,
    args: [input],
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.orderId, value: input.orderId },
      { key: SEARCH_ATTRIBUTES.status, value: 'running' },
    ],
    // The summary and details `startRefund` gives a refund run.
    staticSummary: runSummary(request),
    staticDetails: runDetails(request, workflowId),
  });
  return { handle, workflowId };
}

/** Starts the run the variant's way and waits for its end: a result, a parked run, a failure. */
async function driveRun(
  stack: ChaosStack,
  variant: Variant,
  order: Omit<RunRecord, 'workflowId' | 'outcome' | 'latencyMs'>,
  until: number,
): Promise<RunRecord> {
  const started = Date.now();
  const give = AbortSignal.timeout(Math.max(1, until - started));
  // Every long poll for the result listens on it.
  setMaxListeners(100, give);
  const done = (workflowId: string, outcome: string): RunRecord => ({
    ...order,
    workflowId,
    outcome,
    latencyMs: Date.now() - started,
  });
  const input: BareRefundInput = {
    orderId: order.orderId,
    paymentIntentId: order.paymentIntentId,
    amount: order.amount,
    currency: 'usd',
    email: order.email,
  };
  const watched = variant === 'project' || variant === 'baseline' || variant === 'platform';
  if (watched) {
    const request = { orderId: order.orderId, amount: order.amount, currency: 'usd', requestedBy: 'bench' };
    const { handle, workflowId } =
      variant === 'platform'
        ? await startPlatformRun(stack, input)
        : await startRefund(stack.client, request, variant === 'project' ? TASK_QUEUE : BENCH_QUEUES.baseline);
    // The client's wait (outcomeOf): the run's status attribute every 2 s, its result once it closes.
    const outcome = await outcomeOf(handle as WorkflowHandle<RefundWorkflow>, 2000, give).catch((err: unknown) =>
      give.aborted ? null : (err as Error),
    );
    if (!outcome) return done(workflowId, 'not settled');
    if (outcome instanceof Error) return done(workflowId, 'failed');
    if (outcome.kind === 'result')
      return done(workflowId, variant === 'platform' ? 'completed' : outcome.result.status);
    // Why it parked, in the report: what is known of the refund, and the step and failure it stopped at.
    const { effect, lastFailure } = outcome.state;
    return done(
      workflowId,
      `parked (${effect.status}${lastFailure ? `; ${lastFailure.step}: ${lastFailure.reason}` : ''})`,
    );
  }
  const workflowId = `bench-${variant}-${order.orderId}`;
  // Plain Temporal: payloads as the default converter writes them, no codec.
  const handle = await plainClient(stack).workflow.start(`${variant}RefundWorkflow`, {
    taskQueue: BENCH_QUEUES[variant],
    workflowId,
    args: [input],
  });
  const gaveUp = new Promise<string>((resolve) =>
    give.addEventListener('abort', () => resolve('not settled'), { once: true }),
  );
  const outcome = await Promise.race([
    stack.client.connection
      .withAbortSignal(give, () => handle.result())
      .then(
        () => 'completed',
        () => (give.aborted ? 'not settled' : 'failed'),
      ),
    gaveUp,
  ]);
  return done(workflowId, outcome);
}

/** Runs one segment: `orders` at `concurrency`, the faults armed when asked, the worker killed halfway. */
async function runSegment(
  stack: ChaosStack,
  workers: BenchStackWorkers,
  variant: Variant,
  orders: Omit<RunRecord, 'workflowId' | 'outcome' | 'latencyMs'>[],
  concurrency: number,
  faults: boolean,
  timeoutMs: number,
  onRun: () => void,
): Promise<{ records: RunRecord[]; durationMs: number; injected: CellResult['injected'] }> {
  if (faults) await armFaults(stack, orders.length);
  const started = Date.now();
  const until = started + timeoutMs;
  const records: RunRecord[] = [];
  const { killed } = await driveKilledHalfway(
    orders.length,
    concurrency,
    async (i) => {
      const order = orders[i]!;
      records.push(
        await driveRun(stack, variant, order, until).catch((err: unknown) => ({
          ...order,
          workflowId: '',
          outcome: `not started: ${(err as Error).message}`,
          latencyMs: 0,
        })),
      );
      onRun();
    },
    faults ? workers.workers[variant] : undefined,
  );
  const durationMs = Date.now() - started;
  const workerKills = await killed;
  const fired = faults ? await disarmFaults(stack) : { lostAnswers: 0, rateLimits: 0, resets: 0, smtpTransient: 0 };
  return { records, durationMs, injected: { ...fired, workerKills } };
}

/**
 * Runs `each(i)` for every i below `count`, `concurrency` at a time; with a `worker`, kills it (a new one starts) once
 * half have started. Resolves once every run has ended; `killed`, the kills made, once the kill is done too (a
 * segment's clock stops before it).
 */
export async function driveKilledHalfway(
  count: number,
  concurrency: number,
  each: (i: number) => Promise<void>,
  worker?: VariantWorker,
): Promise<{ killed: Promise<number> }> {
  let next = 0;
  let kill: Promise<number> | undefined;
  const drive = async () => {
    while (next < count) {
      const i = next++;
      if (worker && !kill && next > count / 2) kill = worker.kill().then(() => 1);
      await each(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, drive));
  return { killed: kill ?? Promise.resolve(0) };
}

/** Counts each run's effects where they landed, and its history. */
async function evidence(stack: ChaosStack, store: OrderStore, smtpTries: Map<string, number>, records: RunRecord[]) {
  const requests = (
    await getJson<{ requests: { method: string; path: string; paymentIntent: string | null; at: string }[] }>(
      `${stack.stripeUrl}/_requests`,
    )
  ).requests;
  const pis = new Set(records.map((r) => r.paymentIntentId));
  const refundIds = new Set<string>();
  let duplicateRefunds = 0;
  let duplicateEmails = 0;
  let wrongOrders = 0;
  let smtp = 0;
  for (const r of records) {
    const { effects } = await getJson<{ effects: { type: string; objectId: string }[] }>(
      `${stack.stripeUrl}/_ledger?payment_intent=${r.paymentIntentId}`,
    );
    const refunds = effects.filter((e) => e.type === 'refund.created');
    for (const e of refunds) refundIds.add(e.objectId);
    duplicateRefunds += Math.max(0, refunds.length - 1);
    const { messages } = await getJson<{ messages: unknown[] }>(
      `${stack.mail.apiUrl}/messages?to=${encodeURIComponent(r.email)}`,
    );
    duplicateEmails += Math.max(0, messages.length - 1);
    smtp += smtpTries.get(r.email) ?? 0;
    const order = await store.getOrder(r.orderId);
    if (r.outcome === 'completed' && order?.refundedAmount !== r.amount) wrongOrders += 1;
    else if (r.outcome !== 'completed' && (order?.refundedAmount ?? 0) > r.amount) wrongOrders += 1;
  }
  // Creates carry the payment intent; lookups by id (retrieve) are matched by the refunds these runs made.
  const ours = requests.filter(
    (q) => (q.paymentIntent && pis.has(q.paymentIntent)) || refundIds.has(q.path.split('/').pop() ?? ''),
  );
  const creates = ours.filter((q) => q.method === 'POST' && q.path === '/v1/refunds').length;
  const reads = ours.filter((q) => q.method === 'GET' && q.path.startsWith('/v1/refunds')).length;
  const sizes: { events: number; bytes: number }[] = [];
  const histories = new Map<string, temporal.api.history.v1.IHistory>();
  for (const r of records.filter((x) => x.workflowId)) {
    const history = await stack.client.workflow.getHandle(r.workflowId).fetchHistory();
    sizes.push(historySize(history));
    histories.set(r.workflowId, history);
  }
  return { duplicateRefunds, duplicateEmails, wrongOrders, smtp, creates, reads, sizes, histories };
}

export interface MatrixResult {
  cells: CellResult[];
  /** The project variant's histories from runs without faults, for the replay measurement. */
  projectHistories: { workflowId: string; history: temporal.api.history.v1.IHistory }[];
}

const rotated = <T>(items: readonly T[], by: number): T[] => items.map((_, i) => items[(i + by) % items.length]!);

/** Every cell of the matrix, the variants in turns within each cell. */
export async function runMatrix(
  stack: ChaosStack,
  workers: BenchStackWorkers,
  opts: MatrixOptions,
  onRun: () => void,
): Promise<MatrixResult> {
  const cells: CellResult[] = [];
  const projectHistories: MatrixResult['projectHistories'] = [];
  for (const mode of opts.faultModes) {
    for (const concurrency of opts.concurrency) {
      const rounds = mode === 'none' ? opts.rounds : 1;
      const perRound = runsAt(opts, concurrency);
      const runs = perRound * rounds;
      // Orders are seeded before the clock starts: seeding is not what is measured.
      const orders = {} as Record<Variant, Omit<RunRecord, 'workflowId' | 'outcome' | 'latencyMs'>[]>;
      for (const v of workers.variants) {
        orders[v] = [];
        for (let i = 0; i < runs; i++) {
          const orderId = `bench-${mode}-c${concurrency}-${v}-${i}`;
          const email = `${orderId}@example.test`;
          const amount = 1000 + (i % 20) * 100;
          const order = await seedPaidOrder(stack.stripe, workers.stores[v]!, {
            orderId,
            amount: 5000,
            currency: 'usd',
            customerEmail: email,
          });
          orders[v].push({ orderId, paymentIntentId: order.paymentIntentId, email, amount });
        }
      }
      const acc = Object.fromEntries(
        workers.variants.map((v) => [
          v,
          {
            records: [] as RunRecord[],
            durationMs: 0,
            cpuMs: 0,
            threads: noThreadCpu(),
            store: { statements: 0, commits: 0 },
            stackCpuMs: { temporal: 0, toxiproxy: 0, benchProcess: 0 },
            injected: { lostAnswers: 0, rateLimits: 0, resets: 0, smtpTransient: 0, workerKills: 0 },
          },
        ]),
      ) as Record<
        Variant,
        {
          records: RunRecord[];
          durationMs: number;
          cpuMs: number;
          threads: ThreadCpu;
          store: StoreCounts;
          stackCpuMs: CellResult['stackCpuMsPerRun'];
          injected: CellResult['injected'];
        }
      >;
      for (let round = 0; round < rounds; round++) {
        // Each round starts with the next variant (ABC, BCA, CAB…): the dev server's per-run cost grows as runs
        // pile up in it, so the variant that always went first ran on the emptiest server.
        for (const v of rotated(workers.variants, round)) {
          const slice = orders[v].slice(round * perRound, (round + 1) * perRound);
          if (!slice.length) continue;
          const worker = workers.workers[v]!;
          const cpuBefore = worker.cpuMs();
          const threadsBefore = worker.threadCpu();
          const storeBefore = await worker.storeCounts();
          const stackBefore = stackCpu(stack);
          const seg = await runSegment(
            stack,
            workers,
            v,
            slice,
            concurrency,
            mode === 'faults',
            opts.segmentTimeoutMs,
            onRun,
          );
          // Let the worker finish what the results do not wait for (a last activity's completion) before its CPU is read.
          await sleep(200);
          const a = acc[v];
          a.cpuMs += worker.cpuMs() - cpuBefore;
          const threadsAfter = worker.threadCpu();
          for (const g of THREAD_GROUPS) a.threads[g] += threadsAfter[g] - threadsBefore[g];
          const storeAfter = await worker.storeCounts();
          a.store.statements += storeAfter.statements - storeBefore.statements;
          a.store.commits += storeAfter.commits - storeBefore.commits;
          const stackAfter = stackCpu(stack);
          for (const k of Object.keys(a.stackCpuMs) as (keyof CellResult['stackCpuMsPerRun'])[])
            a.stackCpuMs[k] += stackAfter[k] - stackBefore[k];
          a.records.push(...seg.records);
          a.durationMs += seg.durationMs;
          for (const k of Object.keys(a.injected) as (keyof CellResult['injected'])[]) a.injected[k] += seg.injected[k];
        }
      }
      for (const v of workers.variants) {
        const a = acc[v];
        const ev = await evidence(stack, workers.stores[v]!, workers.smtpTries, a.records);
        const completed = a.records.filter((r) => r.outcome === 'completed');
        const other: Record<string, number> = {};
        for (const r of a.records) if (r.outcome !== 'completed') other[r.outcome] = (other[r.outcome] ?? 0) + 1;
        const effects = 2 * a.records.length;
        cells.push({
          variant: v,
          faults: mode,
          concurrency,
          runs: a.records.length,
          completed: completed.length,
          other,
          durationMs: a.durationMs,
          throughput: completed.length / (a.durationMs / 1000),
          latencyMs: percentiles(completed.map((r) => r.latencyMs)),
          history: {
            eventsPerRun: mean(ev.sizes.map((s) => s.events)),
            bytesPerRun: mean(ev.sizes.map((s) => s.bytes)),
            maxEvents: Math.max(0, ...ev.sizes.map((s) => s.events)),
          },
          requests: {
            stripeCreates: ev.creates,
            stripeReads: ev.reads,
            smtpTries: ev.smtp,
            effectRequestsPerEffect: (ev.creates + ev.smtp) / effects,
            allRequestsPerEffect: (ev.creates + ev.reads + ev.smtp) / effects,
          },
          duplicates: { refunds: ev.duplicateRefunds, emails: ev.duplicateEmails },
          wrongOrders: ev.wrongOrders,
          injected: a.injected,
          worker: {
            cpuMs: a.cpuMs,
            cpuMsPerRun: a.cpuMs / a.records.length,
            peakRssBytes: workers.workers[v]!.peakRssBytes,
            threadsMsPerRun: perRunByThread(a.threads, a.cpuMs, a.records.length),
          },
          store: {
            statementsPerRun: a.store.statements / a.records.length,
            commitsPerRun: a.store.commits / a.records.length,
          },
          stackCpuMsPerRun: {
            temporal: a.stackCpuMs.temporal / a.records.length,
            toxiproxy: a.stackCpuMs.toxiproxy / a.records.length,
            benchProcess: a.stackCpuMs.benchProcess / a.records.length,
          },
        });
        if (v === 'project' && mode === 'none') {
          for (const [workflowId, history] of ev.histories) projectHistories.push({ workflowId, history });
        }
      }
    }
  }
  return { cells, projectHistories };
}
