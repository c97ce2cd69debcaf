// The project's own metrics: each name and type written once here (their labels: docs/production.md), and a typed
// recorder over any SDK MetricMeter (the workflow's, replay-aware; an activity's; the Runtime's).
// The SDK's exporter (Prometheus or OTLP, set up in worker.ts) adds the labels its meter carries
// (namespace, task_queue, workflow_type or activity_type). Workflow code imports this module: types only.
import type { MetricCounter, MetricGauge, MetricMeter, MetricTags } from '@temporalio/common';
import type { Boundary, Certainty, FailureCode } from '../reliability/taxonomy';
import type { BreakerState } from '../reliability/circuit-breaker';
import type { Verdict } from '../reliability/verdict';
import type { StoreObserver } from '../store/database';

const counter = (name: string, help: string) => ({ name, kind: 'counter', help }) as const;
const gauge = (name: string, help: string) => ({ name, kind: 'gauge', help }) as const;
type MetricSpec = ReturnType<typeof counter | typeof gauge>;

/** Counters end in _total as Prometheus expects (the exporter does not add it: countersTotalSuffix stays off for the SDK's own names). */
export const METRICS = {
  started: counter('refunds_started_total', 'saga runs started (refunds and checkouts: workflowType says which)'),
  ended: counter(
    'refunds_ended_total',
    'saga runs ended, by outcome: completed, rejected, compensated, abandoned, stopped, cancelled',
  ),
  parked: counter('refunds_parked_total', 'times a saga run parked for a person, by verdict'),
  reconciliations: counter(
    'refunds_reconciliation_results_total',
    'lookups at the provider for a refund whose outcome was unknown, by what they found',
  ),
  providerRequests: counter(
    'refunds_provider_requests_total',
    'requests put on the wire to a provider (stripe, smtp), by the outcome of their attempt (ok or a failure code)',
  ),
  attempts: counter('refunds_step_attempts_total', 'step attempts, by step and outcome (ok or a failure code)'),
  breaker: gauge('refunds_breaker_state', 'circuit breaker state in this worker: 0 closed, 1 half-open, 2 open'),
  handOvers: counter(
    'refunds_outbox_hand_overs_total',
    'emails handed to the mail server, by outcome: sent, already_sent, unknown, refused, partial',
  ),
  admissionRefusals: counter(
    'refunds_admission_refusals_total',
    'batch occurrences that took fewer queued refunds than asked, a task queue being over ADMISSION_MAX_BACKLOG (or its backlog unreadable)',
  ),
  storeStatements: counter(
    'refunds_store_statements_total',
    'SQL statements sent to the store, by kind: select, insert, update, delete, begin, commit, rollback, other',
  ),
  storeCommits: counter(
    'refunds_store_commits_total',
    'store commits: transactions committed, and writes run outside one (each its own synced commit)',
  ),
  storeSerializationRetries: counter(
    'refunds_store_serialization_retries_total',
    'store transactions run again after the database aborted them for a concurrent one while the rows they read had not moved',
  ),
};

const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };
const HAND_OVER_OUTCOME: Record<Certainty, string> = {
  completed: 'sent',
  not_executed: 'refused',
  partial: 'partial',
  may_have_executed: 'unknown',
  undeterminable: 'unknown',
};

/** A label value Prometheus shows plainly: `compensate, then resume` is compensate_then_resume. */
const snake = (text: string) => text.toLowerCase().replace(/[^a-z0-9]+/g, '_');
/** An attempt's outcome label: ok, cancelled (the activity was cancelled mid-attempt), or its failure code in lower case. */
const outcomeOf = (code: FailureCode | 'cancelled' | null) => (code === null ? 'ok' : code.toLowerCase());

export type RefundMetrics = ReturnType<typeof refundMetrics>;

/**
 * What the project records, by meaning; the meter decides where it goes (a no-op without an exporter). Each instrument
 * is made on its first use and kept (on the worker's meter, making one is a call into the Core): hold the recorder,
 * not the meter. `labels`, when given, go before each call's own.
 */
export function refundMetrics(meter: MetricMeter, labels?: () => MetricTags) {
  const counters = new Map<string, MetricCounter>();
  let breakerGauge: MetricGauge | undefined;
  const tagged = (tags: MetricTags) => (labels ? { ...labels(), ...tags } : tags);
  const add = (spec: MetricSpec, tags: MetricTags = {}, n = 1) => {
    let made = counters.get(spec.name);
    if (!made) counters.set(spec.name, (made = meter.createCounter(spec.name, '', spec.help)));
    made.add(n, tagged(tags));
  };
  return {
    runStarted: () => add(METRICS.started),
    runEnded: (outcome: string) => add(METRICS.ended, { outcome }),
    runParked: (verdict: Verdict) => add(METRICS.parked, { verdict: snake(verdict) }),
    reconciled: (result: string) => add(METRICS.reconciliations, { result }),
    /** One attempt of a step, and the provider requests it put on the wire. */
    attempted: (step: string, boundary: Boundary, code: FailureCode | 'cancelled' | null, requests: number) => {
      add(METRICS.attempts, { step, outcome: outcomeOf(code) });
      if (requests > 0) add(METRICS.providerRequests, { boundary, outcome: outcomeOf(code) }, requests);
    },
    breaker: (breaker: string, state: BreakerState) =>
      (breakerGauge ??= meter.createGauge(METRICS.breaker.name, 'int', '', METRICS.breaker.help)).set(
        BREAKER_VALUE[state],
        tagged({ breaker }),
      ),
    handedOver: (outcome: 'already_sent' | Certainty) =>
      add(METRICS.handOvers, { outcome: outcome === 'already_sent' ? outcome : HAND_OVER_OUTCOME[outcome] }),
    admissionRefused: () => add(METRICS.admissionRefusals),
  };
}

/**
 * The store's statements, commits and serialization retries, on the worker's meter: its counters made once, and added
 * to once per turn of the event loop (a SQLite transaction's statements all run in one), not once per statement:
 * each add is a call into the Core, and one per statement took 2 to 3% of the worker's main thread (profiled), this a
 * third of that.
 */
export function storeMetrics(meter: MetricMeter): StoreObserver {
  const counter = (spec: MetricSpec) => meter.createCounter(spec.name, '', spec.help);
  const statements = counter(METRICS.storeStatements);
  const commits = counter(METRICS.storeCommits);
  const retries = counter(METRICS.storeSerializationRetries);
  // What this turn counted, by counter and label, until it is added.
  const pending = new Map<string, { to: MetricCounter; tags: MetricTags; n: number }>();
  const flush = () => {
    const batch = [...pending.values()];
    pending.clear();
    // A meter that refuses an add (the Core shutting down) loses that count only, never the counting after it.
    for (const { to, tags, n } of batch) {
      try {
        to.add(n, tags);
      } catch {
        // counted nowhere: a metric is never worth failing the worker for
      }
    }
  };
  const count = (key: string, to: MetricCounter, tags: MetricTags = {}) => {
    if (pending.size === 0) setImmediate(flush);
    const entry = pending.get(key) ?? pending.set(key, { to, tags, n: 0 }).get(key)!;
    entry.n += 1;
  };
  return {
    statement: (kind) => count(`statements ${kind}`, statements, { kind }),
    commit: () => count('commits', commits),
    serializationRetry: () => count('retries', retries),
  };
}
