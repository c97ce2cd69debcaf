// One attempt of a step's activity, recorded in the attempt ledger with the requests it sent. The only place an
// activity's failure is shaped (an ApplicationFailure typed by its failure code, retried as the recovery policy says),
// so the workflow sees every failure alike. The body is handed its Attempt: nothing is found from the call stack.
import { Context, log, type Info } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { mayHaveTakenEffect, type AttemptSummary, type StepEvidence } from '../reliability/attempt-ledger';
import { redact, maskEmails } from '../reliability/redaction';
import type { Breakers } from '../reliability/circuit-breaker';
import { backoffDelay, ruleFor, retries, withJitter, type RecoveryPolicy } from '../reliability/policy';
import {
  DOMAIN_OF,
  type Boundary,
  type Certainty,
  type FailureCode,
  type FailureDetails,
} from '../reliability/taxonomy';
import type { AttemptEnd, OpenAttempt, OperationLog } from '../store';
import { activityMetrics, type ActivityMetrics } from './activity-metrics';

export interface Attempt {
  /** Who acts in the audit trail: the run, by its workflow id. */
  readonly actor: string;
  /** When the attempt began on this worker (Date.now()). */
  readonly startedAtMs: number;
  /** The attempt's own start-to-close, as the run's pinned policy scheduled it (undefined: none). */
  readonly startToCloseMs?: number;
  /** How many requests it put on the wire, each written whole (and so could be acted on). */
  requests: number;
  /** The provider's id for the last request that was answered (Stripe's Request-Id). */
  providerRequestId: string | null;
  /** A stamped send's deadline (this worker's Date.now()), fixed before its stamp: no request begins after it. */
  sendBy?: number;
  /** The attempt's ledger row (none for attempts run without a store, e.g. in unit tests). */
  readonly ledger?: OpenAttempt;
  /** Run once the attempt's body has settled: what it borrowed for its requests (a pooled Stripe client) goes back. */
  readonly settled?: (() => void)[];
}

/** An error an activity has already classified. Converted to an ApplicationFailure by runAttempt, never thrown past it. */
export class Classified extends Error {
  override name = 'Classified';
  constructor(
    readonly code: FailureCode,
    readonly certainty: Certainty,
    readonly reason: string,
    message: string,
    readonly extra: {
      retryAfterMs?: number | null;
      providerRequestId?: string | null;
      provider?: FailureDetails['provider'];
      cause?: unknown;
      /** The provider itself failed (unreachable, erroring, slow, rate limiting): what a circuit breaker counts. */
      health?: boolean;
    } = {},
  ) {
    super(message);
  }
}

export interface StepCall {
  step: string;
  /** The step's idempotency key: the attempt ledger is kept per key and run. */
  key: string;
  operationId: string;
  boundary: Boundary;
  /** The circuit breaker this call goes through (provider and operation class, e.g. `stripe:create_refund`); none for reads that reconcile. */
  breaker?: string;
}

/** An activity's call of a step for its attempts: the step, its key and operation, its boundary and breaker, if any. */
export function stepCall(
  step: string,
  at: Pick<StepCall, 'key' | 'operationId'>,
  boundary: Boundary,
  breaker?: string,
): StepCall {
  return { step, key: at.key, operationId: at.operationId, boundary, breaker };
}

export function createAttemptRunner(deps: {
  policy: RecoveryPolicy;
  log: OperationLog;
  random?: () => number;
  /** The worker's circuit breakers; calls that name one go through it. */
  breakers?: Breakers;
  /** Where attempts and breaker states are counted (default: each activity's own meter). */
  metrics?: ActivityMetrics;
}) {
  const random = deps.random ?? Math.random;
  const metricsNow = deps.metrics ?? activityMetrics();

  /**
   * Runs `fn` as one attempt of `call`, handing it the attempt; the result gains the step's evidence. `within`: an
   * attempt of another step made inside this activity (a first read), numbered and timed as it says, never retried here.
   */
  return async function runAttempt<T extends object>(
    call: StepCall,
    classify: (err: unknown) => Classified,
    fn: (attempt: Attempt) => Promise<T>,
    within?: Within,
  ): Promise<T & { evidence: StepEvidence }> {
    const info = within ? inside(Context.current().info, within) : Context.current().info;
    const metrics = metricsNow();
    const { runId } = runOf(info);
    const ledger = within?.ledger ?? openAttempt(deps.log, call, info.attempt);
    const settled: (() => void)[] = [];
    const attempt: Attempt = {
      actor: info.workflowExecution?.workflowId ?? 'activity',
      startedAtMs: Date.now(),
      startToCloseMs: info.startToCloseTimeoutMs,
      requests: 0,
      providerRequestId: null,
      ledger,
      settled,
    };
    // The SDK's activity logger adds the workflow id, the activity and its attempt.
    const logged = { step: call.step, operationId: call.operationId, key: call.key };
    const breaker = call.breaker === undefined ? undefined : deps.breakers?.get(call.breaker);
    const stepRows = async () => (await bestEffort(() => ledgerOf(deps.log, call.key, runId))) ?? [];
    /** Records how the attempt ended (unless its effect's transaction did); returns the step's ledger in this run. */
    const finish = async (end: AttemptEnd) => {
      const finished = await bestEffort(() => ledger.finish(end));
      if (finished?.alone)
        return [{ attempt: info.attempt, startedAt: ledger.startedAt, finishedAt: finished.finishedAt, ...end }];
      return stepRows();
    };
    let admitted = false;
    try {
      const refused = breaker?.admit();
      if (refused) {
        // An open breaker fails the attempt at once, sending nothing (its own row not even begun); Temporal retries it
        // after the breaker's wait. If an earlier attempt of the step may have taken effect, the failure says so, and
        // should the retries run out while refused, the step ends UNKNOWN_OUTCOME (retryDecision), never "not executed".
        const open = (await stepRows()).find((a) => mayHaveTakenEffect(a));
        const wait = { retryAfterMs: refused.retryAfterMs };
        if (open) {
          const message = `${refused.message}; attempt ${open.attempt} of this step may have taken effect (${open.reason ?? 'it never finished'})`;
          throw new Classified('CAPACITY', 'may_have_executed', 'circuit_open_after_uncertain_attempt', message, wait);
        }
        throw new Classified('CAPACITY', 'not_executed', 'circuit_open', refused.message, wait);
      }
      admitted = true;
      const value = await ledger.run(() => fn(attempt)).finally(() => settled.forEach((giveBack) => giveBack()));
      admitted = false;
      if (attempt.requests > 0) breaker?.succeeded();
      else breaker?.abstained();
      if (breaker) metrics.breaker(breaker.name, breaker.snapshot().state);
      metrics.attempted(call.step, call.boundary, null, attempt.requests);
      log.info('step attempt succeeded', {
        ...logged,
        transportRequests: attempt.requests,
        providerRequestId: attempt.providerRequestId,
      });
      return { ...value, evidence: { attempt: info.attempt, ledger: await finish(succeeded(attempt)) } };
    } catch (err) {
      const c = err instanceof CancelledFailure ? undefined : err instanceof Classified ? err : classify(err);
      if (admitted) {
        // A send whose outcome stays open (a lost answer the message log will settle) counts as the unknown it is.
        if (c) breaker?.failed(UNSETTLED.has(c.reason) ? 'UNKNOWN_OUTCOME' : c.code, c.extra.health === true);
        else breaker?.abstained();
      }
      if (breaker) metrics.breaker(breaker.name, breaker.snapshot().state);
      const decision = c && retryDecision(c, call.boundary, info);
      metrics.attempted(call.step, call.boundary, decision?.code ?? 'cancelled', attempt.requests);
      if (!c || !decision) throw err;
      // What the ledger, the log and the failure's details all say of how the attempt ended.
      const end = {
        certainty: c.certainty,
        reason: decision.reason,
        retryAfterMs: c.extra.retryAfterMs ?? null,
        nextDelayMs: decision.nextDelayMs,
        providerRequestId: c.extra.providerRequestId ?? attempt.providerRequestId,
      };
      const transportRequests = attempt.requests;
      log.warn('step attempt failed', { ...logged, code: decision.code, transportRequests, ...end });
      const rows = await finish({ ...end, transportRequests, outcome: decision.code });
      const details: FailureDetails & { ledger: AttemptSummary[] } = {
        ...end,
        code: decision.code,
        domain: DOMAIN_OF[decision.code],
        boundary: call.boundary,
        operationId: call.operationId,
        attempt: info.attempt,
        provider: redact(c.extra.provider ?? {}),
        ledger: rows,
      };
      throw ApplicationFailure.create({
        type: decision.code,
        message: maskEmails(decision.message ?? c.message),
        nonRetryable: decision.nextDelayMs === null,
        nextRetryDelay: decision.nextDelayMs ?? undefined,
        details: [details],
        cause: causeOf(c),
      });
    }
  };

  /**
   * Whether Temporal may try again, and after how long: a retry rule with attempts left, a delay of Retry-After (never
   * less) or the rule's jittered backoff, fitting in what is left of the schedule-to-close (else BUDGET_EXCEEDED).
   */
  function retryDecision(c: Classified, boundary: Boundary, info: Info) {
    const rule = ruleFor(deps.policy, c.code, c.certainty, boundary);
    const maxAttempts = Math.min(rule.maxAttempts, info.retryPolicy?.maximumAttempts || Infinity);
    // Refused while an earlier attempt may have taken effect, or still waiting for the message log, with no retry
    // left: the step ends as it always did, its outcome unknown (reconciled at Stripe, checked by a person at SMTP).
    const last = UNSETTLED.has(c.reason) ? ('UNKNOWN_OUTCOME' as FailureCode) : undefined;
    if (!retries(rule) || info.attempt >= maxAttempts) {
      return { code: last ?? c.code, reason: c.reason, nextDelayMs: null as number | null, message: undefined };
    }
    const retryAfter = c.extra.retryAfterMs ?? 0;
    const delay = withJitter(Math.max(retryAfter, backoffDelay(rule, info.attempt)), rule.jitter, random(), retryAfter);
    const deadline = info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs;
    if (info.scheduleToCloseTimeoutMs > 0 && Date.now() + delay >= deadline) {
      const left = Math.max(0, deadline - Date.now());
      return {
        code: last ?? ('BUDGET_EXCEEDED' as FailureCode),
        reason: last ? c.reason : `${c.code.toLowerCase()}_retry_exceeds_budget`,
        nextDelayMs: null,
        message: `${c.message} (the next attempt would start in ${delay} ms${retryAfter ? `, as Retry-After asks` : ''}; only ${left} ms of this step's budget are left)`,
      };
    }
    return { code: c.code, reason: c.reason, nextDelayMs: delay, message: undefined };
  }
}

export type AttemptRunner = ReturnType<typeof createAttemptRunner>;

/** An attempt of a step made inside another step's activity: its number in its step's ledger, and its time. */
export interface Within {
  attempt: number;
  startToCloseMs: number;
  /** Its ledger row, opened before it (to begin in the host's transaction); opened by the attempt when absent. */
  ledger?: OpenAttempt;
}

/** A step's ledger in one run, as its evidence carries it: what each attempt did, not whose it was. */
export async function ledgerOf(log: OperationLog, key: string, runId: string): Promise<AttemptSummary[]> {
  return (await log.attempts(key, runId)).map(
    ({ id: _id, key: _key, step: _step, operationId: _op, workflowId: _wf, runId: _run, ...summary }) => summary,
  );
}

/** The workflow run an activity's attempts belong to. */
const runOf = (info: Info) => info.workflowExecution ?? { workflowId: '(none)', runId: '(none)' };

/** The ledger row of attempt `attempt` of `call`, in the run of the activity it is made in. */
export function openAttempt(log: OperationLog, call: StepCall, attempt: number): OpenAttempt {
  const { workflowId, runId } = runOf(Context.current().info);
  return log.openAttempt({ ...call, workflowId, runId, attempt });
}

/** The activity's info as an attempt made inside it sees it: its own number and time, and no retry of its own. */
function inside(info: Info, { attempt, startToCloseMs }: Within): Info {
  const retryPolicy = { ...info.retryPolicy, maximumAttempts: 1 };
  return { ...info, attempt, startToCloseTimeoutMs: startToCloseMs, retryPolicy };
}

/** The ledger is evidence, not the effect: if it cannot be written, the attempt's outcome still stands. */
async function bestEffort<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    log.warn('attempt ledger write failed', { error: (err as Error).message });
    return undefined;
  }
}

function causeOf(c: Classified): Error | undefined {
  const cause = c.extra.cause;
  if (!(cause instanceof Error)) return undefined;
  // Keep the chain, minus anything that could carry a customer's address.
  return Object.assign(new Error(maskEmails(cause.message)), {
    name: cause.name,
    stack: cause.stack && maskEmails(cause.stack),
  });
}

/** Reasons that leave an effect open: a step that ends on one ends with its outcome unknown. */
const UNSETTLED: ReadonlySet<string> = new Set(['circuit_open_after_uncertain_attempt', 'awaiting_message_log']);

/** How an attempt that succeeded ends in its ledger: what it sent, and the provider's id for the last answer. */
export function succeeded(attempt: Pick<Attempt, 'requests' | 'providerRequestId'>): AttemptEnd {
  return {
    transportRequests: attempt.requests,
    outcome: 'ok',
    certainty: 'completed',
    reason: null,
    retryAfterMs: null,
    nextDelayMs: null,
    providerRequestId: attempt.providerRequestId,
  };
}

/** Runs the store call that records the attempt's effect, its transaction writing the attempt's end too (one commit). */
export function recordingEffect<T>(attempt: Attempt, fn: () => Promise<T>): Promise<T> {
  return attempt.ledger ? attempt.ledger.recording(() => succeeded(attempt), fn) : fn();
}
