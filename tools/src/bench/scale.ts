// How the costs grow as the work grows: replaying recorded histories, listing and sweeping many
// parked runs, and the history of a run that waits a long time for its provider.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { seedPaidOrder } from '../shop/orders';
import { outcomeOf } from '../../../src/client/outcome';
import { CHAOS_POLICY, type ChaosStack } from '../chaos/chaos-stack';
import { startWorkerProcess } from '../chaos/worker-process';
import { PROJECT_ROOT } from '../../../src/config';
import { UNKNOWN_QUERY } from '../../../src/activities/sweep';
import { DEFAULT_POLICY } from '../../../src/reliability/default-policy';
import type { RecoveryPolicy } from '../../../src/reliability/policy';
import { REFUND_PENDING_PAYMENT_METHOD } from '../servers/stripe/resources';
import { refundWorkflowId, type RefundWorkflow } from '../../../src/contract';
import { historySize, watchProcess } from './measure';
import fs from 'node:fs';

export interface ScaleOptions {
  /** Histories replayed, for each size (the recorded ones, each replayed as often as needed). */
  replay: number[];
  /** Parked runs listed and swept, for each size (the population grows to each in turn). */
  parked: number[];
  /** Runs one sweep occurrence asks at most (the sweep's own limit is 1000). */
  sweepMaxRuns: number;
  /** How long the pending refund stays pending, so the run polls its provider meanwhile. */
  longWaitMs: number;
}

export interface ScaleResult {
  replay: {
    histories: number;
    distinct: number;
    ms: number;
    perSecond: number;
    failures: number;
    firstFailure?: string;
  }[];
  parked: {
    runs: number;
    /** Time to bring the population to this size (not part of what is measured). */
    populateMs: number;
    attention: { listed: number; ms: number; msPerRun: number; peakRssBytes: number } | null;
    sweep: {
      asked: number;
      stillUnknown: number;
      reconciled: number;
      ms: number;
      msPerRun: number;
      workerMaxRssBytes: number;
    } | null;
  }[];
  /** Measurements that failed, with why: the rest of the report stands. */
  errors: string[];
  longWait: {
    /** The run's wait for its provider, and the polls it made meanwhile. */
    waitedMs: number;
    polls: number;
    events: number;
    bytes: number;
    /** A run of the same request that did not wait. */
    baselineEvents: number;
    eventsPerPoll: number;
    /** The shipped policy's polls over its whole awaitProvider deadline, and the history that would leave. */
    shippedPolicy: { deadlineHours: number; polls: number; events: number };
    /** A parked run's events when it parked, and again after it waited for a decision through the parked-run measurements. */
    parkedDecision: {
      workflowId: string;
      eventsAtPark: number;
      eventsLater: number;
      waitedMs: number;
      added: string[];
    };
  };
}

/** The parked population's worker: the refund worker on a queue of its own, with short windows and fast reconciliation. */
const PARK_QUEUE = 'bench-parked';
const PARK_POLICY: RecoveryPolicy = {
  ...CHAOS_POLICY,
  version: `${DEFAULT_POLICY.version}-bench-park`,
  // One lookup, then the run parks: the population is built quickly; the sweep asks again.
  rules: CHAOS_POLICY.rules.map((r) =>
    r.code === 'UNKNOWN_OUTCOME' && r.action === 'reconcile' ? { ...r, maxAttempts: 1 } : r,
  ),
  awaitProvider: { deadlineMs: 300_000, poll: { initialMs: 1000, coefficient: 2, maxMs: 2000 }, jitter: 0 },
  // Every create loses its answer on purpose: the breaker would only slow the population down.
  breaker: { ...CHAOS_POLICY.breaker, enabled: false },
};
/**
 * What this worker believes of the provider: no key window to resend in (a lost create is only
 * looked up, never resent), and lookups that may miss a refund for an hour (one not found is no
 * proof). A refund whose answer is lost and hidden from lists stays unknown, and its run parks.
 */
const PARK_ENV = { STRIPE_IDEMPOTENCY_TTL_HOURS: String(1 / 3600_000), STRIPE_LIST_CONSISTENCY_MS: '3600000' };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function post(url: string, body: unknown): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
}

/** Replays `n` histories through a replay worker (the recorded ones in turn): histories per second. */
async function measureReplay(
  stack: ChaosStack,
  recorded: { workflowId: string; history: temporal.api.history.v1.IHistory }[],
  n: number,
): Promise<ScaleResult['replay'][number]> {
  if (recorded.length === 0) throw new Error('no recorded histories to replay');
  const histories = Array.from({ length: n }, (_, i) => ({
    workflowId: `${recorded[i % recorded.length]!.workflowId}#${i}`,
    history: recorded[i % recorded.length]!.history,
  }));
  const started = Date.now();
  let failures = 0;
  let firstFailure: string | undefined;
  for await (const result of Worker.runReplayHistories(
    { workflowBundle: { codePath: path.join(stack.dir, 'workflows.js') }, dataConverter: stack.dataConverter },
    histories,
  )) {
    if (!result.error) continue;
    failures += 1;
    firstFailure ??= `${result.workflowId}: ${explain(result.error)}`;
  }
  const ms = Date.now() - started;
  return {
    histories: n,
    distinct: Math.min(n, recorded.length),
    ms,
    perSecond: n / (ms / 1000),
    failures,
    ...(firstFailure && { firstFailure }),
  };
}

/** `npm run inspect -- --attention --json` as its own process: how long it takes, how much memory, how many runs it lists. */
async function measureAttention(stack: ChaosStack): Promise<ScaleResult['parked'][number]['attention']> {
  const started = Date.now();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(PROJECT_ROOT, 'src', 'cli', 'inspect.ts'), '--attention', '--json'],
    { env: stack.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const watch = watchProcess(child.pid!, 20);
  let listed = 0;
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    for (const byte of d) if (byte === 10) listed += 1;
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const { maxRssBytes } = watch.stop();
  if (code !== 0) throw new Error(`inspect --attention exited ${code}: ${stderr}`);
  const ms = Date.now() - started;
  return { listed, ms, msPerRun: ms / Math.max(1, listed), peakRssBytes: maxRssBytes };
}

/** The reconciliation sweep, as a schedule would start it: one occurrence asking up to `maxRuns` parked unknown runs. */
async function measureSweep(
  stack: ChaosStack,
  workerPid: number,
  maxRuns: number,
  label: string,
): Promise<ScaleResult['parked'][number]['sweep']> {
  const watch = watchProcess(workerPid);
  const started = Date.now();
  const report = await stack.client.workflow.execute('sweepWorkflow', {
    taskQueue: PARK_QUEUE,
    workflowId: `bench-sweep-${label}`,
    args: [{ maxRuns, waitMs: 300_000 }],
  });
  const ms = Date.now() - started;
  const { maxRssBytes } = watch.stop();
  const r = report as { reconciled: string[]; stillUnknown: string[]; pending: string[] };
  const asked = r.reconciled.length + r.stillUnknown.length + r.pending.length;
  return {
    asked,
    stillUnknown: r.stillUnknown.length,
    reconciled: r.reconciled.length,
    ms,
    msPerRun: ms / Math.max(1, asked),
    workerMaxRssBytes: maxRssBytes,
  };
}

/** How long the parked count must stand still before the runs it lacks are started again. */
const SETTLED_MS = 10_000;

/**
 * Brings the parked population to `size`: refunds whose create answer is lost and stays
 * invisible to lookups park with the refund unknown, as a provider outage would leave them. The
 * population is counted, not assumed: a sweep over a smaller one lets some runs find their refund
 * and leave it, so once the count stands still short of `size`, the runs it lacks are started.
 * `started` numbers their orders.
 */
async function populate(
  stack: ChaosStack,
  started: { runs: number },
  size: number,
  onProgress: (n: number) => void,
): Promise<void> {
  const creates = { method: 'POST', path: '/v1/refunds', idempotencyKeyPrefix: 'refund:bench-park:' };
  const startOne = async (i: number) => {
    const orderId = `park-${i}`;
    await seedPaidOrder(stack.stripe, stack.store, {
      orderId,
      amount: 5000,
      currency: 'usd',
      customerEmail: `${orderId}@example.test`,
    });
    await stack.client.workflow.start('refundWorkflow', {
      taskQueue: PARK_QUEUE,
      workflowId: refundWorkflowId(orderId, 1),
      args: [{ orderId, amount: 1000, currency: 'usd', requestedBy: 'bench' }],
    });
  };
  let last = -1;
  let changedAt = 0;
  for (;;) {
    const { count: parked } = await stack.client.workflow.count(UNKNOWN_QUERY);
    onProgress(parked);
    if (parked >= size) break;
    if (parked !== last) [last, changedAt] = [parked, Date.now()];
    // The first time round, and whenever the count has stood still: start what it lacks.
    if (changedAt === 0 || Date.now() - changedAt >= SETTLED_MS) {
      const missing = size - parked;
      await post(`${stack.stripeUrl}/_faults`, { kind: 'drop_after_commit', match: creates, count: missing });
      await post(`${stack.stripeUrl}/_faults`, {
        kind: 'lagging_list',
        lagMs: 600_000,
        match: creates,
        count: missing,
      });
      const until = started.runs + missing;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (started.runs < until) await startOne(started.runs++);
        }),
      );
      changedAt = Date.now();
    }
    await sleep(2000);
  }
  await fetch(`${stack.stripeUrl}/_faults`, { method: 'DELETE' });
}

/** The message of an error and of each cause under it. */
function explain(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 6; e = e.cause) parts.push(e.message);
  return parts.join(': ') || String(err);
}

export async function measureScale(
  stack: ChaosStack,
  recorded: { workflowId: string; history: temporal.api.history.v1.IHistory }[],
  opts: ScaleOptions,
  phase: (name: string) => void,
): Promise<ScaleResult> {
  const errors: string[] = [];
  const measured = async <T>(what: string, fn: () => Promise<T>): Promise<T | null> => {
    try {
      return await fn();
    } catch (err) {
      errors.push(`${what}: ${explain(err)}`);
      return null;
    }
  };
  const replay: ScaleResult['replay'] = [];
  for (const n of opts.replay) {
    phase(`replaying ${n} histories`);
    replay.push(await measureReplay(stack, recorded, n));
  }

  fs.writeFileSync(path.join(stack.dir, 'park-policy.json'), JSON.stringify(PARK_POLICY));
  const park = await startWorkerProcess({
    ...stack.env,
    TASK_QUEUE: PARK_QUEUE,
    OPERATION_SCOPE: 'bench-park',
    RECOVERY_POLICY_FILE: path.join(stack.dir, 'park-policy.json'),
    ...PARK_ENV,
  });
  try {
    // A run that waits for its provider: a pending refund, settled by the server after longWaitMs.
    phase('a long wait for the provider');
    const longWait = await measureLongWait(stack, opts.longWaitMs);

    // A run that waits for a person: its email bounces for good, and it parks until decided; nobody decides.
    const decision = await parkForDecision(stack);

    const parked: ScaleResult['parked'] = [];
    const started = { runs: 0 };
    for (const target of opts.parked) {
      const began = Date.now();
      await populate(stack, started, target, (n) => phase(`parking runs: ${n}/${target}`));
      const populateMs = Date.now() - began;
      phase(`inspect --attention over ${target} parked runs`);
      const attention = await measured(`inspect --attention over ${target} parked runs`, () => measureAttention(stack));
      phase(`the sweep over ${target} parked runs`);
      const sweep = await measured(`the sweep over ${target} parked runs`, () =>
        measureSweep(stack, park.pid, Math.min(opts.sweepMaxRuns, target), String(target)),
      );
      parked.push({ runs: target, populateMs, attention, sweep });
    }
    const later = (await stack.client.workflow.getHandle(decision.workflowId).fetchHistory()).events ?? [];
    const added = later
      .slice(decision.events)
      .map((e) => temporal.api.enums.v1.EventType[e.eventType ?? 0]!.replace(/^EVENT_TYPE_/, ''));
    return {
      replay,
      parked,
      errors,
      longWait: {
        ...longWait,
        parkedDecision: {
          workflowId: decision.workflowId,
          eventsAtPark: decision.events,
          eventsLater: later.length,
          waitedMs: Date.now() - decision.at,
          added,
        },
      },
    };
  } finally {
    await park.stop().catch(() => park.kill());
  }
}

/** Starts a run that parks for a decision (its email is refused for good) and waits until it has parked. */
async function parkForDecision(stack: ChaosStack): Promise<{ workflowId: string; events: number; at: number }> {
  const orderId = 'wait-decision';
  await seedPaidOrder(stack.stripe, stack.store, {
    orderId,
    amount: 5000,
    currency: 'usd',
    customerEmail: `reject-${orderId}@example.test`,
  });
  const workflowId = refundWorkflowId(orderId, 1);
  await stack.client.workflow.start('refundWorkflow', {
    taskQueue: PARK_QUEUE,
    workflowId,
    args: [{ orderId, amount: 1000, currency: 'usd', requestedBy: 'bench' }],
  });
  const outcome = await outcomeOf(
    stack.client.workflow.getHandle<RefundWorkflow>(workflowId),
    500,
    AbortSignal.timeout(120_000),
  );
  if (outcome.kind !== 'parked')
    throw new Error(`${workflowId} was to park for a decision; it ended ${JSON.stringify(outcome.result)}`);
  return {
    workflowId,
    events: historySize(await stack.client.workflow.getHandle(workflowId).fetchHistory()).events,
    at: Date.now(),
  };
}

/** Polls the shipped policy makes within its awaitProvider deadline. */
export function shippedPolls(): { deadlineHours: number; polls: number } {
  const { deadlineMs, poll } = DEFAULT_POLICY.awaitProvider;
  let polls = 0;
  for (
    let t = 0, wait = poll.initialMs;
    t + wait <= deadlineMs;
    t += wait, wait = Math.min(poll.maxMs, wait * poll.coefficient)
  )
    polls += 1;
  return { deadlineHours: deadlineMs / 3600_000, polls };
}

async function measureLongWait(
  stack: ChaosStack,
  waitMs: number,
): Promise<Omit<ScaleResult['longWait'], 'parkedDecision'>> {
  const run = async (orderId: string, paymentMethod?: string) => {
    await seedPaidOrder(
      stack.stripe,
      stack.store,
      { orderId, amount: 5000, currency: 'usd', customerEmail: `${orderId}@example.test` },
      paymentMethod,
    );
    const handle = await stack.client.workflow.start('refundWorkflow', {
      taskQueue: PARK_QUEUE,
      workflowId: refundWorkflowId(orderId, 1),
      args: [{ orderId, amount: 1000, currency: 'usd', requestedBy: 'bench' }],
    });
    const began = Date.now();
    const outcome = await outcomeOf(
      stack.client.workflow.getHandle<RefundWorkflow>(handle.workflowId),
      1000,
      AbortSignal.timeout(waitMs + 120_000),
    );
    if (outcome.kind !== 'result' || outcome.result.status !== 'completed')
      throw new Error(
        `${orderId} did not complete: ${JSON.stringify(outcome.kind === 'result' ? outcome.result : outcome.state.outcome)}`,
      );
    const history = await handle.fetchHistory();
    const timers = history.events?.filter((e) => e.timerStartedEventAttributes).length ?? 0;
    return { ms: Date.now() - began, size: historySize(history), timers };
  };
  const baseline = await run('wait-baseline');
  const waited = await run('wait-pending', REFUND_PENDING_PAYMENT_METHOD);
  const polls = waited.timers - baseline.timers;
  const eventsPerPoll = polls > 0 ? (waited.size.events - baseline.size.events) / polls : 0;
  const shipped = shippedPolls();
  return {
    waitedMs: waited.ms,
    polls,
    events: waited.size.events,
    bytes: waited.size.bytes,
    baselineEvents: baseline.size.events,
    eventsPerPoll,
    shippedPolicy: { ...shipped, events: Math.round(baseline.size.events + shipped.polls * eventsPerPoll) },
  };
}
