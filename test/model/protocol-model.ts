// A model-based test of the operation protocol (issue 23, item 10). fast-check generates sequences
// of commands (a run of operation version 1 or 2 of one order starts; one paused worker goes on by
// one step; true time moves; the provider commits, answers or cuts a request on the wire; a worker
// dies) and the model checks the invariants after every command.
//
// What is real: the operation log and order store (openStore on a SQLite file), the activities
// beginOperation, createRefund and reconcileRefund with the attempt runner, the Stripe SDK and the
// StripeTransport. What is simulated: the provider (fake-provider.ts, behind node:http), time and
// the hosts' clocks (virtual-time.ts), Temporal's side (activity attempts with their start-to-close
// timeout and retries; the refund workflow's settleEarlier, createRefund and reconcile loops,
// mirrored below from src/workflows since workflow code runs only inside Temporal).
//
// Interleavings: every call an activity makes to the operation log, and every provider request it
// is about to send, pauses its worker until a `step` command lets it go on. A worker paused while
// time advances is a stalled worker; one that outlives its start-to-close timeout is a zombie whose
// attempt Temporal has already retried elsewhere. fast-check's scheduler only orders promises; these
// explicit pauses let the commands put time between any two steps, which is what the bugs here need.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AsyncLocalStorage } from 'node:async_hooks';
import fc from 'fast-check';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type Stripe from 'stripe';
import { createAttemptRunner, type Attempt as AttemptContext } from '../../src/activities/attempt';
import { createOperationActivities } from '../../src/activities/operations';
import { refundCreation } from '../../src/activities/create-refund';
import { refundReconciliation } from '../../src/activities/reconcile-refund';
import { createStripeClient } from '../../src/activities/stripe-client';
import { loadConfig } from '../../src/config';
import { runSettings } from '../../src/deps';
import {
  MAX_RESUBMISSIONS,
  type BeginResult,
  type ReconcileResult,
  type RefundReceipt,
  type RunSettings,
} from '../../src/contract';
import { backoffDelay, ruleFor, temporalRetryPolicy } from '../../src/reliability/policy';
import type { Boundary, Certainty, FailureCode } from '../../src/reliability/taxonomy';
import type { RefundRequest } from '../../src/domain/refund-request';
import { openStore, type OperationLog, type OperationRecord, type OrderStore } from '../../src/store';
import { FakeProvider, type How, type Processing, type Refund } from './fake-provider';
import { VirtualTime } from './virtual-time';

/** The settings a worker with the default configuration runs with (10 s requests, 10 s list lag, 24 h keys). */
const SETTINGS: RunSettings = runSettings(loadConfig({}));
const POLICY = SETTINGS.policy;
const KEY_WINDOW_MS = 24 * 3600_000;
const AMOUNTS = { 1: 400, 2: 500 } as const;
const HOSTS = ['w1', 'w2'];
/**
 * Where a create's worker pauses: after the read it acts on, the stamp of its send, its settled
 * record, and just before its request. Lookups run through: a stalled lookup only answers as of
 * a later time, and its one write (a proof) is refused if anything was sent since it read.
 */
const PAUSING = new Set(['get', 'markSent', 'settle']);
const PAUSING_STEP = 'create_refund';
/** Where a worker's stall decides the most: between a send's stamp and its request. */
const STALL_POINTS = new Set(['markSent', 'about to send the create']);

export type Invariant = 'proof' | 'refunds' | 'claims';
export const INVARIANTS: Invariant[] = ['proof', 'refunds', 'claims'];

interface StepFailure {
  code: FailureCode;
  certainty: Certainty;
  reason: string;
}

class Failed extends Error {
  constructor(readonly failure: StepFailure) {
    super(`${failure.code}/${failure.certainty}: ${failure.reason}`);
  }
}

/** One activity attempt on one worker. */
class Attempt {
  pause: { what: string; go: () => void } | null = null;
  /** The real attempt scope, once the attempt is about to send: its send deadline is an edge in time. */
  scope: AttemptContext | undefined;
  dead = false;
  /** Temporal gave up on it (start-to-close) and retried elsewhere; it may still be running. */
  zombie = false;
  constructor(
    readonly label: string,
    readonly step: string,
    readonly host: string,
    readonly run: Run,
  ) {}
}

interface Claim {
  status: 'refunded' | 'none' | 'unknown';
  refundId: string | null;
  why: string;
}

class Run {
  effect: Claim['status'] = 'none';
  ended: Claim | null = null;
  operationId: string | null = null;
  attempts = 0;
  /** Activities this run has called: each has its own label, its attempts numbered within it. */
  activities = 0;
  constructor(
    readonly label: string,
    readonly version: 1 | 2,
    readonly index: number,
  ) {}
}

class RunEnded extends Error {}

const attemptHere = new AsyncLocalStorage<Attempt>();
const never = new Promise<never>(() => undefined);

/** One case: an order, its runs, the provider, the hosts; the store is shared by the cases of a property run. */
export class System {
  readonly time: VirtualTime;
  readonly provider: FakeProvider;
  readonly attempts: Attempt[] = [];
  readonly runs: Run[] = [];
  readonly trace: string[] = [];
  readonly orderId: string;
  private progress = 0;
  private readonly startedAt: number;
  private readonly log: OperationLog;
  private acts!: ReturnType<typeof refundCreation> &
    ReturnType<typeof refundReconciliation> &
    ReturnType<typeof createOperationActivities>;
  private readonly uninstall: (() => void)[] = [];

  constructor(
    readonly store: OrderStore,
    readonly caseNo: number,
    readonly skews: Record<string, number>,
    readonly checks: ReadonlySet<Invariant>,
    plan: Processing[] = [],
  ) {
    this.orderId = `ord_${caseNo}`;
    this.time = new VirtualTime(Date.UTC(2026, 0, 1) + caseNo * 7 * 86_400_000);
    this.startedAt = this.time.now;
    for (const [host, skew] of Object.entries(skews)) this.time.setSkew(host, skew);
    this.provider = new FakeProvider(this.time, KEY_WINDOW_MS, () => attemptHere.getStore()?.label ?? '(none)', [
      ...plan,
    ]);
    this.provider.onCommit = (r) => this.atCommit(r);
    this.log = this.pausing(store.operations);
  }

  async start(): Promise<void> {
    this.time.install();
    this.uninstall.push(() => this.time.uninstall(), this.provider.install());
    // Built once this case's clock is in place: the attempt runner keeps the Date.now it finds.
    const attempt = createAttemptRunner({ policy: POLICY, log: this.log });
    const config = {
      secretKey: 'sk_test_model',
      apiBase: 'http://stripe.model',
      requestTimeoutMs: SETTINGS.provider.requestTimeoutMs,
    };
    const stripe = (attempt: AttemptContext) => this.pausingStripe(createStripeClient(config, attempt), attempt);
    const payments = { stripe, log: this.log, attempt, windows: SETTINGS.provider };
    const orderStore = new Proxy(this.store, {
      get: (target, p) => (p === 'operations' ? this.log : Reflect.get(target, p)),
    });
    this.acts = {
      ...refundCreation(payments),
      ...refundReconciliation(payments),
      ...createOperationActivities({ store: orderStore, attempt, settings: SETTINGS }),
    };
    await this.store.seedOrder({
      id: this.orderId,
      paymentIntentId: `pi_${this.caseNo}`,
      customerEmail: 'model@example.com',
      currency: 'usd',
      amount: 1000,
    });
    // Version 1 was asked for first; the commands start version 2, and more runs of either (a repeated request, a person's retry).
    this.startRun(1);
    await this.settle();
  }

  stop(): void {
    for (const undo of this.uninstall.splice(0).reverse()) undo();
  }

  note(line: string): void {
    this.trace.push(`${((this.time.now - this.startedAt) / 1000).toFixed(1).padStart(7)} s  ${line}`);
  }

  // ---- commands -------------------------------------------------------------------------------

  startRun(version: 1 | 2): void {
    const run = new Run(
      `v${version}.r${this.runs.filter((r) => r.version === version).length + 1}`,
      version,
      this.runs.length,
    );
    this.runs.push(run);
    this.note(`${run.label} starts`);
    this.progress += 1;
    void this.workflow(run);
  }

  /** Paused workers, those Temporal still waits for first, the newest first: step(0) moves the run on, higher indexes wake zombies. */
  paused(): Attempt[] {
    const paused = this.attempts.filter((a) => a.pause && !a.dead).reverse();
    return [...paused.filter((a) => !a.zombie), ...paused.filter((a) => a.zombie)];
  }

  step(i: number): void {
    const a = this.paused()[i % this.paused().length]!;
    const { what, go } = a.pause!;
    a.pause = null;
    this.note(`${a.label}@${a.host} goes on after ${what}`);
    go();
  }

  kill(i: number): void {
    const a = this.paused()[i % this.paused().length]!;
    a.dead = true;
    a.pause = null;
    this.note(`${a.label}@${a.host} dies (its worker is gone)`);
    for (const w of this.provider.requests.filter((r) => r.attempt === a.label && r.state === 'held'))
      this.provider.clientGone(w.req);
  }

  act(i: number, how: How, lagMs: number): void {
    const held = this.provider.held().filter((w) => w.method === 'POST');
    const w = held[i % held.length]!;
    this.note(
      `provider: request #${w.id} (${w.attempt}) ${how === 'cut' ? 'cut without commit' : `commits (list lag ${lagMs / 1000} s), ${how === 'commit_answer' ? 'answered' : how === 'commit_cut' ? 'answer cut' : `a proxy answered ${how.slice(-3)}`}`}`,
    );
    this.provider.act(w, how, lagMs);
  }

  /**
   * The times ahead at which something changes: a timer fires (a request's own timeout, start-to-close,
   * a workflow's wait), a paused send's deadline passes. Only the
   * order of events against these edges matters, so moving to just before or after one reaches the
   * boundary cases that fixed steps of time would rarely hit.
   */
  edges(): number[] {
    const sendBys = this.paused().flatMap((a) =>
      a.scope?.sendBy === undefined ? [] : [a.scope.sendBy - this.time.skew(a.host)],
    );
    const all = [...this.time.dueTimes(), ...sendBys];
    return [...new Set(all.filter((t) => t > this.time.now))].sort((a, b) => a - b);
  }

  async advance(ms: number): Promise<void> {
    this.note(`time +${ms >= 3600_000 ? `${ms / 3600_000} h` : `${ms / 1000} s`}`);
    await this.time.advance(ms, () => this.settle());
  }

  /** Lets everything that can run without a command run: until nothing moved for a few event-loop turns. */
  async settle(): Promise<void> {
    let last = -1;
    for (let quiet = 0; quiet < 3;) {
      await new Promise((resolve) => setImmediate(resolve));
      await this.time.fireDue(this.time.now, () => new Promise((resolve) => setImmediate(resolve)));
      const now = this.progress + this.time.activity + this.provider.requests.length;
      quiet = now === last ? quiet + 1 : 0;
      last = now;
    }
  }

  // ---- the invariants ---------------------------------------------------------------------------

  private violations: string[] = [];

  private violate(invariant: Invariant, message: string): void {
    if (this.checks.has(invariant)) this.violations.push(`[${invariant}] ${message}`);
  }

  /** A create commits: a later version's refund may not land on an earlier one that is not settled. */
  private atCommit(refund: Refund): void {
    this.note(`provider: ${refund.id} committed for ${refund.operationId} by ${refund.by}`);
    const version = Number(/:v(\d+)$/.exec(refund.operationId)?.[1]);
    for (const earlier of this.operationIds().filter((id) => Number(/:v(\d+)$/.exec(id)?.[1]) < version)) {
      const live = this.provider.live(earlier);
      if (live.length > 0)
        this.violate(
          'refunds',
          `${refund.id} of ${refund.operationId} committed while request #${live[0]!.id} of earlier ${earlier} was still on the wire`,
        );
    }
  }

  private operationIds(): string[] {
    return [...new Set(this.runs.map((r) => r.operationId).filter((id): id is string => id !== null))];
  }

  async check(): Promise<void> {
    const ops = (await this.store.operations.forOrder(this.orderId)).map((o) => o.operation);
    const refunds = this.provider.refunds;
    for (const op of ops) {
      const mine = this.provider.refundsOf(op.operationId);
      if (mine.length > 1)
        this.violate(
          'refunds',
          `${mine.length} refunds for ${op.operationId}: ${mine.map((r) => `${r.id} (${r.by})`).join(', ')}`,
        );
      const proven =
        op.status === 'intent' && op.absenceConfirmedAt !== null && op.provenAbsentThrough === op.requestsSent;
      if (proven) {
        const live = this.provider.live(op.operationId);
        if (live.length > 0) {
          this.violate(
            'proof',
            `${op.operationId} is proven absent (through send ${op.provenAbsentThrough}, at ${op.absenceConfirmedAt}) while its request #${live[0]!.id} (${live[0]!.attempt}, written ${this.ago(live[0]!.writtenAt)}) may still commit`,
          );
        }
        if (mine.length > 0)
          this.violate('proof', `${op.operationId} is proven absent while ${mine[0]!.id} (${mine[0]!.by}) exists`);
      }
      if (op.refund && !refunds.some((r) => r.id === op.refund!.refundId && r.operationId === op.operationId)) {
        this.violate(
          'claims',
          `the store records ${op.refund.refundId} for ${op.operationId}, which the provider does not have`,
        );
      }
    }
    const versions = new Set(refunds.filter((r) => r.orderId === this.orderId).map((r) => r.operationId));
    if (versions.size > 1)
      this.violate(
        'refunds',
        `the order was refunded by ${versions.size} operation versions: ${refunds.map((r) => `${r.id} for ${r.operationId} (${r.by})`).join('; ')}`,
      );
    for (const run of this.runs.filter((r) => r.ended)) {
      const claim = run.ended!;
      const mine = run.operationId ? this.provider.refundsOf(run.operationId) : [];
      if (claim.status === 'refunded' && !mine.some((r) => r.id === claim.refundId))
        this.violate(
          'claims',
          `${run.label} reports refund ${claim.refundId}, which the provider does not have for ${run.operationId}`,
        );
      if (claim.status === 'none') {
        const own = mine.filter((r) => r.by.includes(` of ${run.label}/`));
        if (own.length > 0)
          this.violate(
            'claims',
            `${run.label} reports that nothing was refunded (${claim.why}), but its own request made ${own[0]!.id}`,
          );
      }
    }
    if (this.violations.length > 0) {
      const found = this.violations.splice(0);
      throw new Error(
        `${found.join('\n')}\n\nWhat happened (true time since the first command):\n${this.trace.join('\n')}`,
      );
    }
  }

  private ago(at: number): string {
    return `${((this.time.now - at) / 1000).toFixed(1)} s ago`;
  }

  // ---- the code under test, paused where a worker can stall --------------------------------------

  /** The operation log, each call run on the database's clock, each answer pausing the worker that asked. */
  private pausing(log: OperationLog): OperationLog {
    return new Proxy(log, {
      get: (target, p) => {
        const method = Reflect.get(target, p) as unknown;
        if (typeof method !== 'function') return method;
        // An attempt's ledger row is written by the object this returns, not by a call the protocol orders.
        if (p === 'openAttempt') return (method as (...x: unknown[]) => unknown).bind(target);
        return async (...args: unknown[]) => {
          const a = attemptHere.getStore();
          if (a?.dead) return never;
          const result = await this.time
            .onHost('store', () => (method as (...x: unknown[]) => Promise<unknown>).apply(target, args))
            .then(
              (value) => ({ value }),
              (error: unknown) => ({ error }),
            );
          if (a) this.noteStore(a, String(p), args, result);
          if (a?.step === PAUSING_STEP && PAUSING.has(String(p))) await this.pauseHere(a, `${String(p)}`);
          if ('error' in result) throw result.error;
          return result.value;
        };
      },
    });
  }

  private noteStore(a: Attempt, method: string, args: unknown[], result: { value?: unknown; error?: unknown }): void {
    if ('error' in result) {
      if (method === 'markSent') this.note(`${a.label}: markSent refused (${(result.error as Error).message})`);
      return;
    }
    const op = (result.value as { record?: OperationRecord; applied?: boolean } | undefined) ?? {};
    if (method === 'markSent') {
      const r = result.value as OperationRecord;
      this.note(`${a.label}@${a.host}: send #${r.requestsSent} of ${r.operationId} stamped ${r.lastSentAt}`);
    }
    if (method === 'settle' && op.applied) {
      const u = args[1] as { status: string; absenceConfirmedAt?: string };
      this.note(
        `${a.label}: ${args[0] as string} settled ${u.status}${u.absenceConfirmedAt ? ` (absence proven as of ${u.absenceConfirmedAt}, through send ${op.record!.provenAbsentThrough})` : ''}`,
      );
    }
  }

  private pauseHere(a: Attempt, what: string): Promise<void> {
    this.progress += 1;
    return new Promise((go) => {
      a.pause = { what, go };
    });
  }

  /** The Stripe client the activities get: each request pauses its worker just before the SDK hands it to the transport. */
  private pausingStripe(stripe: Stripe, attempt: AttemptContext): Stripe {
    const before = async <T>(what: string, send: () => Promise<T>): Promise<T> => {
      const a = attemptHere.getStore();
      if (a?.step === PAUSING_STEP) {
        a.scope = attempt;
        await this.pauseHere(a, `about to ${what}`);
      }
      if (a?.dead) return never;
      return send();
    };
    const refunds = {
      create: (...args: Parameters<Stripe['refunds']['create']>) =>
        before('send the create', () => stripe.refunds.create(...args)),
      list: (...args: Parameters<Stripe['refunds']['list']>) =>
        before('list refunds', () => stripe.refunds.list(...args)),
      retrieve: (...args: Parameters<Stripe['refunds']['retrieve']>) =>
        before('retrieve a refund', () => stripe.refunds.retrieve(...args)),
    };
    return { refunds } as unknown as Stripe;
  }

  // ---- Temporal's side: activity attempts, their timeouts and retries ----------------------------

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.time.setTimer(() => resolve(), ms));
  }

  /** One activity, with Temporal's retries: attempts on alternating hosts, each bounded by start-to-close. */
  private async activity<T>(
    run: Run,
    step: string,
    boundary: Boundary,
    sends: boolean,
    call: () => Promise<T>,
  ): Promise<T> {
    const timeouts = POLICY.timeouts[boundary === 'stripe' ? 'stripe' : 'store'];
    const retry = temporalRetryPolicy(POLICY, boundary);
    const scheduledAt = this.time.now;
    const label = `${run.label}/${step}.${++run.activities}`;
    for (let n = 1; ; n++) {
      run.attempts += 1;
      const a = new Attempt(`${label}#${n}`, step, HOSTS[(run.index + run.attempts) % HOSTS.length]!, run);
      this.attempts.push(a);
      const info = {
        attempt: n,
        activityType: step,
        startToCloseTimeoutMs: timeouts.startToCloseMs,
        scheduleToCloseTimeoutMs: timeouts.scheduleToCloseMs,
        scheduledTimestampMs: scheduledAt,
        currentAttemptScheduledTimestampMs: this.time.now,
        workflowExecution: { workflowId: run.label, runId: `${run.label}-run` },
      };
      const env = new MockActivityEnvironment(info, { logger: new DefaultLogger('ERROR') });
      const done = this.time
        .onHost(a.host, () => attemptHere.run(a, () => env.run(call) as Promise<T>))
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
      const outcome = await Promise.race([
        done,
        this.sleep(timeouts.startToCloseMs).then(() => ({ timeout: true as const })),
      ]);
      let failure: StepFailure;
      let delay: number;
      if ('value' in outcome) return outcome.value;
      if ('error' in outcome) {
        const err = outcome.error;
        if (!(err instanceof ApplicationFailure)) throw err;
        const d = err.details?.[0] as StepFailure;
        failure = { code: d.code, certainty: d.certainty, reason: d.reason };
        this.note(`${a.label} failed: ${failure.code}/${failure.certainty} ${failure.reason}`);
        if (err.nonRetryable) throw new Failed(failure);
        delay = Number(
          err.nextRetryDelay ??
            backoffDelay(
              {
                backoff: {
                  initialMs: retry.initialInterval,
                  coefficient: retry.backoffCoefficient,
                  maxMs: retry.maximumInterval,
                },
              },
              n,
            ),
        );
      } else {
        a.zombie = true;
        this.note(`${a.label}@${a.host} timed out (start-to-close)${a.dead ? '' : '; it may still be running'}`);
        // As the workflow's step runner classifies a Temporal timeout (describeFailure).
        failure = sends
          ? { code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed', reason: 'activity_timeout' }
          : { code: 'TRANSIENT_DEPENDENCY', certainty: 'not_executed', reason: 'activity_timeout' };
        delay = backoffDelay(
          {
            backoff: {
              initialMs: retry.initialInterval,
              coefficient: retry.backoffCoefficient,
              maxMs: retry.maximumInterval,
            },
          },
          n,
        );
      }
      if (n >= retry.maximumAttempts || this.time.now + delay >= scheduledAt + timeouts.scheduleToCloseMs)
        throw new Failed(failure);
      await this.sleep(delay);
    }
  }

  // ---- the refund workflow's protocol, mirrored from src/workflows/refund/ (saga, refund-effect, reconcile) -----

  private end(run: Run, status: Claim['status'], refundId: string | null, why: string): never {
    run.ended = { status, refundId, why };
    this.progress += 1;
    this.note(`${run.label} ends: ${status}${refundId ? ` ${refundId}` : ''} (${why})`);
    throw new RunEnded();
  }

  private async workflow(run: Run): Promise<void> {
    const request: RefundRequest = {
      orderId: this.orderId,
      amount: AMOUNTS[run.version],
      currency: 'usd',
      reason: 'requested_by_customer',
      requestedBy: 'model',
      operationVersion: run.version,
    };
    const startedAt = this.time.now;
    try {
      let begin: BeginResult;
      try {
        begin = await this.activity(run, 'load_order', 'store', false, () => this.acts.beginOperation({ request }));
      } catch (err) {
        if (err instanceof Failed) this.end(run, 'none', null, `load_order failed: ${err.message}`);
        throw err;
      }
      const op = begin.operation;
      run.operationId = op.operationId;
      if (begin.problem) this.end(run, 'none', null, `rejected: ${begin.problem}`);
      if (op.refund) this.end(run, 'refunded', op.refund.refundId, 'its refund was already on record');
      // settleEarlier: an earlier version that may have refunded comes first; this run never sends its request.
      for (const other of begin.blockers) {
        const settled = await this.reconcile(run, other.operationId, other.request.amount, startedAt, false);
        if (settled.kind === 'completed' || settled.kind === 'partial')
          this.end(run, 'none', null, `earlier ${other.operationId} refunded; nothing sent for this one`);
        if (settled.kind === 'unknown')
          this.end(run, 'none', null, `earlier ${other.operationId} unknown; nothing sent for this one`);
      }
      await this.createRefund(run, op.operationId, request.amount, begin.order.paymentIntentId, startedAt);
    } catch (err) {
      if (!(err instanceof RunEnded)) {
        this.note(`${run.label} crashed: ${(err as Error).stack ?? String(err)}`);
        run.ended = { status: 'unknown', refundId: null, why: `model error: ${(err as Error).message}` };
      }
    }
  }

  private async createRefund(
    run: Run,
    operationId: string,
    amount: number,
    paymentIntentId: string,
    startedAt: number,
  ): Promise<void> {
    const input = {
      orderId: this.orderId,
      operationId,
      paymentIntentId,
      amount,
      currency: 'usd',
      reason: 'requested_by_customer' as const,
      idempotencyKey: `${operationId}:create_refund`,
    };
    for (let resubmissions = 0; ;) {
      try {
        const receipt: RefundReceipt = await this.activity(run, 'create_refund', 'stripe', true, () =>
          this.acts.createRefund(input),
        );
        this.end(run, 'refunded', receipt.refundId, receipt.replayed ? 'receipt replayed' : 'created');
      } catch (err) {
        if (!(err instanceof Failed)) throw err;
        const { code, certainty, reason } = err.failure;
        const action = ruleFor(POLICY, code, certainty, 'stripe').action;
        const uncertain =
          certainty !== 'not_executed' && (action === 'retry' || action === 'repair' || certainty === 'completed');
        if (action !== 'reconcile' && !uncertain) {
          // decideStop: "Whether it took effect is unknown", or "Nothing was refunded".
          if (certainty !== 'not_executed') this.end(run, 'unknown', null, `create_refund ${code} (${reason})`);
          this.end(run, 'none', null, `create_refund ${code} (${reason}): "Nothing was refunded"`);
        }
      }
      run.effect = 'unknown';
      const settled = await this.reconcile(run, operationId, amount, startedAt, true);
      if (settled.kind === 'completed' || settled.kind === 'partial')
        this.end(run, 'refunded', settled.refund!.refundId, 'receipt from reconciliation');
      if (settled.kind === 'unknown' || settled.kind === 'failed')
        this.end(run, 'unknown', null, `reconciliation: ${settled.kind}`);
      if (resubmissions >= MAX_RESUBMISSIONS)
        this.end(run, 'unknown', null, `unknown through ${MAX_RESUBMISSIONS} resubmissions`);
      resubmissions += 1;
      this.note(`${run.label}: ${settled.kind}, sends again`);
    }
  }

  private async reconcile(
    run: Run,
    operationId: string,
    amount: number,
    startedAt: number,
    mayResubmit: boolean,
  ): Promise<{ kind: 'completed' | 'partial' | 'failed' | 'absent' | 'resubmit' | 'unknown'; refund?: RefundReceipt }> {
    const rule = ruleFor(POLICY, 'UNKNOWN_OUTCOME', 'may_have_executed', 'stripe');
    const target = {
      operationId,
      paymentIntentId: `pi_${this.caseNo}`,
      amount,
      currency: 'usd',
      idempotencyKey: `${operationId}:create_refund`,
    };
    for (let lookup = 1; ; lookup++) {
      let r: ReconcileResult | undefined;
      try {
        r = await this.activity(run, 'reconcile', 'stripe', false, () => this.acts.reconcileRefund(target));
        this.note(`${run.label}: reconcile ${operationId}: ${r.result}`);
      } catch (err) {
        if (!(err instanceof Failed)) throw err;
        if (err.failure.code === 'BUDGET_EXCEEDED') return { kind: 'unknown' };
      }
      if (r?.refund && (r.result === 'completed' || r.result === 'partial' || r.result === 'failed'))
        return { kind: r.result, refund: r.refund };
      if (r?.result === 'not_started_confirmed') return { kind: 'absent' };
      if (r?.result === 'not_found_inconclusive' && r.insideDedupeWindow && mayResubmit) return { kind: 'resubmit' };
      if (lookup >= rule.maxAttempts) return { kind: 'unknown' };
      // Jitter at its midpoint; the run's budget as its deadline (the workflow also counts calls and retry time).
      const untilConclusive = r?.conclusiveAt ? Date.parse(r.conclusiveAt) - this.time.now : 0;
      const wait = Math.max(backoffDelay(rule, lookup), untilConclusive);
      if (this.time.now + wait > startedAt + POLICY.budget.deadlineMs) return { kind: 'unknown' };
      await this.sleep(wait);
    }
  }
}

// ---- commands -----------------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<System, System>;

const after = async (s: System, action: () => void | Promise<void>) => {
  await action();
  await s.settle();
  await s.check();
};

export class StartRun implements Cmd {
  constructor(readonly version: 1 | 2) {}
  check = (s: Readonly<System>) =>
    s.runs.filter((r) => r.version === this.version).length < (this.version === 1 ? 2 : 2);
  run = (_: System, s: System) => after(s, () => s.startRun(this.version));
  toString = () => `start(v${this.version})`;
}

/** How long a worker at a stall point stalls before it goes on: not at all, a while, or until just before its send deadline. */
type Stall = 0 | 1000 | 4000 | 'to_deadline';

export class Step implements Cmd {
  constructor(
    readonly i: number,
    readonly times: number,
    readonly stall: Stall,
  ) {}
  check = (s: Readonly<System>) => s.paused().length > 0;
  run = async (_: System, s: System) => {
    const a = s.paused()[this.i % s.paused().length]!;
    if (a.pause && STALL_POINTS.has(a.pause.what) && this.stall !== 0) {
      const deadline = a.scope?.sendBy === undefined ? undefined : a.scope.sendBy - s.time.skew(a.host) - 1;
      const ms = this.stall === 'to_deadline' ? (deadline ?? s.time.now) - s.time.now : this.stall;
      if (ms > 0) await after(s, () => s.advance(ms));
    }
    // The same worker goes on `times` steps in a row, a worker that is not stalled, but stops where a
    // stall matters most (after a send's stamp, before the send): there the next command decides.
    for (let n = 0; n < this.times && a.pause && !a.dead; n++) {
      await after(s, () => s.step(s.paused().indexOf(a)));
      if (a.pause && STALL_POINTS.has(a.pause.what)) break;
    }
  };
  toString = () =>
    `step(${this.i}${this.times > 1 ? ` ×${this.times}` : ''}${this.stall === 0 ? '' : `, stalled ${this.stall === 'to_deadline' ? 'to its send deadline' : `${this.stall} ms`} first`})`;
}

export class Kill implements Cmd {
  constructor(readonly i: number) {}
  check = (s: Readonly<System>) => s.paused().length > 0;
  run = (_: System, s: System) => after(s, () => s.kill(this.i));
  toString = () => `kill(${this.i})`;
}

export class Advance implements Cmd {
  constructor(readonly ms: number) {}
  // Hours pass only while no run is going (a parked run, the next request a day later): a day-long stall of every worker is not news.
  check = (s: Readonly<System>) => this.ms < 3600_000 || s.runs.every((r) => r.ended);
  run = (_: System, s: System) => after(s, () => s.advance(this.ms));
  toString = () => `advance(${this.ms})`;
}

export class AdvanceToEdge implements Cmd {
  constructor(
    readonly k: number,
    readonly side: -1 | 1,
  ) {}
  check = () => true;
  run = (_: System, s: System) =>
    after(s, async () => {
      const edges = s.edges();
      if (edges.length === 0) return;
      const to = edges[this.k % edges.length]! + this.side;
      if (to > s.time.now) await s.advance(to - s.time.now);
    });
  toString = () => `advanceTo(edge ${this.k} ${this.side < 0 ? '- 1 ms' : '+ 1 ms'})`;
}

export class Act implements Cmd {
  constructor(
    readonly i: number,
    readonly how: How,
    readonly lagMs: number,
  ) {}
  check = (s: Readonly<System>) => s.provider.held().some((w) => w.method === 'POST');
  run = (_: System, s: System) => after(s, () => s.act(this.i, this.how, this.lagMs));
  toString = () => `provider(${this.i}, ${this.how}, lag ${this.lagMs})`;
}

const C = SETTINGS.provider.consistencyMs;
const T = SETTINGS.provider.requestTimeoutMs;

export const commands = fc.commands(
  [
    fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom<1 | 2>(2, 1).map((v) => new StartRun(v)) },
      {
        weight: 12,
        arbitrary: fc
          .tuple(fc.nat(2), fc.constantFrom(1, 2, 3, 5, 8), fc.constantFrom<Stall>(0, 0, 1000, 4000, 'to_deadline'))
          .map(([i, n, stall]) => new Step(i, n, stall)),
      },
      // Small moves (a stalled worker, a slow store) up to the windows' edges, and long ones past the key window.
      {
        weight: 3,
        arbitrary: fc.constantFrom(500, 1000, 2000, 3000, 4000, 5000, 8000, T).map((ms) => new Advance(ms)),
      },
      {
        weight: 4,
        arbitrary: fc.tuple(fc.nat(2), fc.constantFrom<-1 | 1>(-1, 1)).map(([k, side]) => new AdvanceToEdge(k, side)),
      },
      {
        weight: 1,
        arbitrary: fc
          .constantFrom(T + C, 60_000, 3600_000, SETTINGS.provider.dedupeWindowMs, KEY_WINDOW_MS + 3600_000)
          .map((ms) => new Advance(ms)),
      },
      {
        weight: 2,
        arbitrary: fc
          .tuple(
            fc.nat(2),
            fc.constantFrom<How>('commit_answer', 'commit_cut', 'cut', 'commit_proxy_503', 'commit_proxy_429'),
            fc.constantFrom(C, C / 2, 0),
          )
          .map(([i, how, lag]) => new Act(i, how, lag)),
      },
      { weight: 1, arbitrary: fc.nat(3).map((i) => new Kill(i)) },
    ),
  ],
  { maxCommands: 40, size: 'large' },
);

/**
 * How the provider processes each new create: after a delay up to the request's own timeout (the
 * slowest the contract allows), answering or cutting the connection after the commit; or cut without
 * commit; or held, for the `provider` command or the request's timer to decide.
 */
export const plan = fc.array(
  fc.oneof(
    fc.constant<Processing>('hold'),
    fc.record({
      delayMs: fc.constantFrom(T - 1, 0, 1000, T / 2),
      how: fc.constantFrom<How>('commit_answer', 'commit_cut', 'cut', 'commit_proxy_503', 'commit_proxy_429'),
      listLagMs: fc.constantFrom(C, C / 2, 0),
    }),
  ),
  { maxLength: 6 },
);

/** Each worker host's clock against true time (the database's clock is true time). */
export const skews = fc.record({
  w1: fc.integer({ min: -30_000, max: 30_000 }),
  w2: fc.integer({ min: -30_000, max: 30_000 }),
});

export interface ModelOptions {
  runs: number;
  seed?: number;
  checks?: readonly Invariant[];
  /** Where the SQLite file lives (a temporary directory unless given). */
  dir?: string;
  verbose?: boolean;
}

/** Runs the property; throws fast-check's report (seed, path, shrunk counterexample, what happened) on a failure. */
export async function checkProtocol(options: ModelOptions): Promise<{ seed: number; cases: number }> {
  // In memory where the system has a tmpfs: the store syncs every commit, and its durability is not what is tested here.
  const dir =
    options.dir ?? fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'protocol-model-'));
  const store = await openStore(`sqlite:${path.join(dir, 'orders.db')}`);
  const checks = new Set(options.checks ?? INVARIANTS);
  const seed = options.seed ?? Date.now() ^ (Math.random() * 0x100000000);
  let cases = 0;
  try {
    const property = fc.asyncProperty(skews, plan, commands, async (clocks, processing, cmds) => {
      const system = new System(store, ++cases, clocks, checks, processing);
      await system.start();
      try {
        await fc.asyncModelRun(() => ({ model: system, real: system }), cmds);
      } finally {
        system.stop();
      }
    });
    const report = await fc.check(property, { numRuns: options.runs, seed, verbose: options.verbose ?? false });
    // fast-check's report (seed, replay path, shrunk counterexample), then what the invariant saw and the story of that case.
    if (report.failed)
      throw new Error(
        `${fc.defaultReportMessage(report)}\n\n${(report.errorInstance as Error | undefined)?.message ?? String(report.errorInstance)}`,
      );
    return { seed, cases };
  } finally {
    await store.close();
    if (!options.dir) fs.rmSync(dir, { recursive: true, force: true });
  }
}
