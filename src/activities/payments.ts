// Payment activities: the refund through the official Stripe SDK, and reconciliation of a refund
// whose outcome is unknown. The operation's record in the store is consulted before every send.
import { Context } from '@temporalio/activity';
import Stripe from 'stripe';
import { lookupKey, type Evidenced, type ProviderWindows, type ReconcileResult, type RefundReceipt } from '../contract';
import type { REFUND_REASONS } from '../domain/refund-request';
import type { OperationLog, OperationRecord, OperationUpdate } from '../store/types';
import { LaterVersionError } from '../store/errors';
import { Classified, type AttemptRunner } from './attempt';
import { currentAttemptScope } from './attempt-scope';
import { requestTimeout } from './request-deadline';
import { storeFailure } from './store-failures';
import { stripeFailure } from './stripe-failures';
import { StripeTransport } from './stripe-transport';

export interface StripeClientConfig {
  secretKey: string;
  apiBase?: string;
  /** One request, answer included; must end well inside the activity's start-to-close. */
  requestTimeoutMs?: number;
}

export function createStripeClient(cfg: StripeClientConfig): Stripe {
  return new Stripe(cfg.secretKey, {
    // Temporal's activity retry policy owns retries; our transport gives the SDK no error it would resend on.
    maxNetworkRetries: 0,
    httpClient: new StripeTransport(),
    timeout: cfg.requestTimeoutMs ?? 10_000,
    ...(cfg.apiBase !== undefined && apiBaseConfig(cfg.apiBase)),
  });
}

function apiBaseConfig(apiBase: string): Pick<Stripe.StripeConfig, 'host' | 'port' | 'protocol'> {
  const url = new URL(apiBase);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`apiBase must be http(s): ${apiBase}`);
  // The SDK always requests /v1/...; a base with a path would silently be ignored.
  if (url.pathname !== '/' || url.search !== '') throw new Error(`apiBase must not have a path or query: ${apiBase}`);
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (protocol === 'https' ? 443 : 80) : Number(url.port),
    protocol,
  };
}

export interface CreateRefundInput {
  orderId: string;
  operationId: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
  reason: (typeof REFUND_REASONS)[number];
  /** Derived deterministically in workflow code, so every attempt of this operation sends the same key. */
  idempotencyKey: string;
}

export interface ReconcileRefundInput {
  operationId: string;
  /** A refund id known from a failure's details (a refund made whose receipt could not be recorded). */
  refundId?: string;
  paymentIntentId: string;
  amount: number;
  currency: string;
  /** The create step's key: lookups are kept in the attempt ledger under `<key>#reconcile`. */
  idempotencyKey: string;
}

export interface PaymentDeps {
  stripe: Stripe;
  log: OperationLog;
  attempt: AttemptRunner;
  windows: ProviderWindows;
  /** The clock send stamps are compared with; the store's (see OperationLog.clock) unless given. */
  now?: () => number;
}

export function createPaymentActivities(deps: PaymentDeps) {
  const { stripe, log, attempt } = deps;
  const now = async () => (deps.now ? deps.now() : log.clock());
  const actor = () => Context.current().info.workflowExecution?.workflowId ?? 'activity';

  /** How long after its stamp a send of this worker's can still be on the wire. */
  const onWireForMs = deps.windows.requestTimeoutMs + SEND_CLOCK_MARGIN_MS;

  /** The latest a send of this worker's stamped at `stampedAt` (the store's clock) can still be on the wire. */
  const offTheWireBy = (stampedAt: number) => stampedAt + onWireForMs;

  /**
   * The latest any recorded send can still be on the wire: each sender's own bound, which may be a
   * longer timeout than this worker's (a rollout); this worker's arithmetic for sends stamped before
   * bounds were recorded. Null if nothing was sent.
   */
  const sendsOffTheWireBy = (op: OperationRecord) =>
    op.lastSentAt === null ? null : Math.max(offTheWireBy(Date.parse(op.lastSentAt)), op.offTheWireBy === null ? 0 : Date.parse(op.offTheWireBy));

  /** Whether a request sent now would still reach the provider inside the key's dedupe window. */
  const insideWindow = (op: OperationRecord, at: number) => op.firstSentAt === null || offTheWireBy(at) < Date.parse(op.firstSentAt) + deps.windows.dedupeWindowMs;

  /**
   * Sends the refund, unless the operation's record says not to. The result is the provider's
   * receipt as it is, a refund for less than asked or one already failed included: the workflow
   * compares it with what was asked. Only the create may be sent, and only with the operation's key.
   */
  async function createRefund(input: CreateRefundInput): Promise<Evidenced<RefundReceipt>> {
    const call = { step: 'create_refund', key: input.idempotencyKey, operationId: input.operationId, boundary: 'stripe' as const, breaker: 'stripe:create_refund' };
    // Every failure carries the operation's record as it stands after it: what the run says of the refund comes from there.
    return attempt(call, paymentFailure(true), () => withRecord(input.operationId, async () => {
      const op = await log.get(input.operationId);
      if (!op) throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'no_intent', `no intent is recorded for operation ${input.operationId}; nothing was sent`);
      // The receipt is already known (an earlier run, or reconciliation): replay it, send nothing.
      if (op.refund) return { ...op.refund, replayed: true };
      const proven = op.provenAbsentThrough === op.requestsSent;
      if (op.lastSentAt !== null && !insideWindow(op, await now()) && !proven) {
        throw new Classified(
          'UNKNOWN_OUTCOME',
          'may_have_executed',
          'outside_dedupe_window',
          `not sent: operation ${input.operationId} was first sent at ${op.firstSentAt}, outside the provider's dedupe window for key ${input.idempotencyKey}; ` +
            'reconcile with the provider before any new request',
        );
      }
      // Half the timeout at most: the stamp takes its share of the deadline even when the timeout is short.
      const enough = (ms: number) => ms >= Math.min(MIN_REQUEST_MS, deps.windows.requestTimeoutMs / 2);
      // The send's deadline, fixed before its stamp is taken: nothing of it is on the wire after stamp + STRIPE_TIMEOUT_MS.
      const sendBy = Date.now() + requestTimeout(deps.windows.requestTimeoutMs);
      if (!enough(sendBy - Date.now())) throw timeSpent();
      try {
        await log.markSent(input.operationId, actor(), onWireForMs);
      } catch (err) {
        // A later version was begun: this one never goes out. If its earlier send's outcome is open, that comes first.
        if (err instanceof LaterVersionError && op.requestsSent > (op.provenAbsentThrough ?? 0)) {
          throw new Classified('UNKNOWN_OUTCOME', 'may_have_executed', 'later_version_exists', `${err.message}; an earlier send of it is not settled`, { cause: err });
        }
        throw err;
      }
      let refund: Stripe.Response<Stripe.Refund>;
      try {
        // The stamp may have waited for the database: what is left of the deadline is the request's, or it does not go out.
        const timeout = sendBy - Date.now();
        if (!enough(timeout)) throw timeSpent();
        const scope = currentAttemptScope();
        if (scope) scope.sendBy = sendBy;
        refund = await stripe.refunds.create(
          {
            payment_intent: input.paymentIntentId,
            amount: input.amount,
            reason: input.reason,
            metadata: { order_id: input.orderId, operation_id: input.operationId },
          },
          { idempotencyKey: input.idempotencyKey, timeout },
        );
      } catch (err) {
        const failure = stripeFailure(err, true);
        if (failure.certainty !== 'not_executed') {
          // Best effort: the failure itself tells the workflow; the record makes later runs reconcile first.
          await log.settle(input.operationId, { status: 'unknown', reason: failure.reason }, actor(), 'refund_outcome_unknown', { message: failure.message }).catch(() => undefined);
        } else if (provesNothingSent(failure) && (op.provenAbsentThrough ?? 0) === op.requestsSent) {
          // This send had no effect, and every earlier one is proven so: the record says so, counted in
          // sends, unless another send went out meanwhile. Best effort, like the above: the failure stands.
          const prove = async () => {
            const proof = { status: 'intent' as const, reason: failure.reason, absenceConfirmedAt: new Date(await now()).toISOString(), ifRequestsSent: op.requestsSent + 1 };
            await log.settle(input.operationId, proof, actor(), 'refund_not_executed', { message: failure.message });
          };
          await prove().catch(() => undefined);
        }
        throw failure;
      }
      const receipt = toReceipt(refund, refund.lastResponse.headers['idempotent-replayed'] === 'true');
      const failed = refund.status === 'failed' || refund.status === 'canceled';
      const partial = refund.currency !== input.currency || refund.amount < input.amount;
      const update: OperationUpdate = failed
        ? { status: 'failed', refund: receipt, reason: refund.failure_reason ?? refund.status ?? 'failed' }
        : partial
          ? { status: 'partial', refund: receipt, reason: 'refund_differs' }
          : { status: 'refunded', refund: receipt };
      try {
        await log.settle(
          input.operationId,
          update,
          actor(),
          'refund_confirmed',
          { requestId: refund.lastResponse.requestId ?? null },
        );
      } catch (err) {
        // The refund exists; only its record is missing. A retry with the same key (or reconciliation) recovers the receipt.
        const c = storeFailure(err);
        throw new Classified(c.code, 'completed', 'receipt_not_recorded', `refund ${refund.id} was made, but its receipt could not be recorded: ${c.message}`, {
          providerRequestId: refund.lastResponse.requestId ?? null,
          provider: { refundId: refund.id },
          cause: err,
        });
      }
      return receipt;
    }));
  }

  /** A failure of `work` with the operation's record after it among its facts (best effort: the failure stands without them). */
  async function withRecord<T>(operationId: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      const c = paymentFailure(true)(err);
      const op = await log.get(operationId).catch(() => undefined);
      if (!op) throw c;
      const record = { operationStatus: op.status, requestsSent: op.requestsSent, provenAbsentThrough: op.provenAbsentThrough };
      throw new Classified(c.code, c.certainty, c.reason, c.message, { ...c.extra, provider: { ...c.extra.provider, ...record } });
    }
  }

  /**
   * Asks the provider what became of an operation whose outcome is unknown: by refund id when one is
   * known, else by listing the payment intent's refunds for one whose metadata names the operation.
   * A "not found" is conclusive only once the provider's consistency window has passed since the
   * last send's request was off the wire, and only if nothing was sent since the lookup began.
   */
  async function reconcileRefund(input: ReconcileRefundInput): Promise<Evidenced<ReconcileResult>> {
    const call = { step: 'reconcile', key: lookupKey(input.idempotencyKey, 'reconcile'), operationId: input.operationId, boundary: 'stripe' as const };
    return attempt(call, paymentFailure(false), async () => {
      const op = await log.get(input.operationId);
      if (!op) throw new Classified('INVALID_ARGUMENTS', 'not_executed', 'no_intent', `no intent is recorded for operation ${input.operationId}`);
      const known = op.refund?.refundId ?? input.refundId;
      // The provider's answer is as of when we asked, not when it arrived.
      const askedAt = await now();
      const looked = known
        ? [await stripe.refunds.retrieve(known, {}, { timeout: requestTimeout(deps.windows.requestTimeoutMs) })]
        : await listRefunds(stripe, input.paymentIntentId, deps.windows.requestTimeoutMs);
      const scanned = looked.length;
      const found = looked.filter((r) => r.metadata?.operation_id === input.operationId);
      const base = {
        method: known ? ('retrieve' as const) : ('list' as const),
        scanned,
        matches: found.length,
        insideDedupeWindow: insideWindow(op, askedAt),
        requestsSent: op.requestsSent,
      };
      const who = actor();
      const settle = (update: OperationUpdate, detail: Record<string, unknown>) => log.settle(input.operationId, update, who, 'reconciled', detail);
      if (found.length === 0 && known) {
        // A refund looked up by id that does not carry this operation proves nothing either way.
        return { ...base, result: 'unknown', refund: null, conclusiveAt: null, note: `refund ${known} does not carry operation ${input.operationId}` };
      }
      if (found.length === 0) {
        const offWire = sendsOffTheWireBy(op);
        const conclusive = offWire === null ? 0 : offWire + deps.windows.consistencyMs;
        const conclusiveAt = offWire === null ? null : new Date(conclusive).toISOString();
        if (askedAt >= conclusive) {
          const proof = { status: 'intent' as const, absenceConfirmedAt: new Date(askedAt).toISOString(), ifRequestsSent: op.requestsSent };
          const { applied, record } = await settle(proof, { result: 'not_started_confirmed', scanned });
          if (applied) {
            const why = op.lastSentAt === null ? 'no request for this operation was ever sent' : `no refund carries operation ${input.operationId}, and the consistency window since the last send has passed`;
            return { ...base, result: 'not_started_confirmed', refund: null, conclusiveAt, note: why };
          }
          const why = record.requestsSent !== op.requestsSent ? 'it was sent again while it was looked up' : `it became ${record.status} meanwhile`;
          return { ...base, result: 'not_found_inconclusive', refund: null, conclusiveAt, note: `operation ${input.operationId}: ${why}; look again` };
        }
        await log.audit(input.operationId, who, 'reconciled', { result: 'not_found_inconclusive', scanned, conclusiveAt });
        return { ...base, result: 'not_found_inconclusive', refund: null, conclusiveAt, note: `no refund carries operation ${input.operationId} yet; the provider's list may lag until ${conclusiveAt}` };
      }
      const refund = found[found.length - 1]!; // the oldest, since Stripe lists newest first
      const receipt = toReceipt(refund, false);
      const extra = found.length > 1 ? `; ${found.length} refunds carry this operation id (${found.map((r) => r.id).join(', ')})` : '';
      if (refund.status === 'failed' || refund.status === 'canceled') {
        await settle({ status: 'failed', refund: receipt, reason: refund.failure_reason ?? refund.status }, { result: 'failed' });
        return { ...base, result: 'failed', refund: receipt, conclusiveAt: null, note: `refund ${refund.id} ${refund.status} (${refund.failure_reason ?? 'no reason given'})${extra}` };
      }
      if (refund.amount < input.amount || refund.currency !== input.currency) {
        await settle({ status: 'partial', refund: receipt, reason: 'refund_differs' }, { result: 'partial' });
        return { ...base, result: 'partial', refund: receipt, conclusiveAt: null, note: `refund ${refund.id} is ${refund.amount} ${refund.currency} of the ${input.amount} ${input.currency} asked${extra}` };
      }
      await settle({ status: 'refunded', refund: receipt }, { result: 'completed', refundId: refund.id });
      return { ...base, result: 'completed', refund: receipt, conclusiveAt: null, note: `refund ${refund.id} exists (${refund.status})${extra}` };
    });
  }

  return { createRefund, reconcileRefund };
}

/**
 * How far past `stamp + STRIPE_TIMEOUT_MS` a send may still end, read on the store's clock. Its
 * deadline is fixed and enforced on the worker's clock (Date.now() and a timer), while its stamp and
 * every later lookup are read on the store's (the database server's, on PostgreSQL). A constant
 * offset between the two cancels out (the deadline is fixed before the stamp); this covers a step
 * or drift of either clock during the send, and a timer that fires late on a busy worker.
 */
export const SEND_CLOCK_MARGIN_MS = 1000;

/**
 * A failed send that proves it made no refund: it never left this process, or Stripe itself (its
 * request id on the answer) refused it below 500. A 5xx, or an answer without Stripe's request id
 * (a proxy's), proves only that the last hop said no: the request may have gone on to Stripe.
 */
function provesNothingSent(failure: Classified): boolean {
  if (failure.certainty !== 'not_executed') return false;
  if (failure.reason === 'attempt_time_spent' || failure.reason === 'connection_failed_before_send') return true;
  const status = failure.extra.provider?.statusCode;
  return typeof status === 'number' && status < 500 && typeof failure.extra.providerRequestId === 'string' && failure.extra.providerRequestId !== '';
}

/** Below this, a request would likely time out by our own hand: it is not sent at all. */
const MIN_REQUEST_MS = 1000;

const timeSpent = () =>
  new Classified('TRANSIENT_DEPENDENCY', 'not_executed', 'attempt_time_spent', 'not sent: too little of this attempt is left for the request to finish');

/**
 * All of a payment intent's refunds, newest first, a page at a time: each page's timeout is cut
 * to what is left of the attempt (the SDK's auto-paging would reuse the first page's).
 */
/** The refunds in a payment intent's list that carry the operation id: more than one is never right (the gate's and the follow-up's single_refund). */
export function refundIdsOf(listed: Stripe.Refund[], operationId: string): string[] {
  return listed.filter((r) => r.metadata?.operation_id === operationId).map((r) => r.id);
}

export async function listRefunds(stripe: Stripe, paymentIntentId: string, maxRequestMs: number): Promise<Stripe.Refund[]> {
  const all: Stripe.Refund[] = [];
  for (let startingAfter: string | undefined; ; ) {
    const page = await stripe.refunds.list(
      { payment_intent: paymentIntentId, limit: 100, ...(startingAfter && { starting_after: startingAfter }) },
      { timeout: requestTimeout(maxRequestMs) },
    );
    all.push(...page.data);
    if (!page.has_more || page.data.length === 0) return all;
    startingAfter = page.data[page.data.length - 1]!.id;
  }
}

/** Stripe's errors by the Stripe table; anything else these activities meet comes from the store. */
export const paymentFailure = (write: boolean) => (err: unknown) => (err instanceof Stripe.errors.StripeError ? stripeFailure(err, write) : storeFailure(err));

export type PaymentActivities = ReturnType<typeof createPaymentActivities>;

export function toReceipt(refund: Stripe.Refund, replayed: boolean): RefundReceipt {
  const pi = refund.payment_intent;
  return {
    refundId: refund.id,
    paymentIntentId: (typeof pi === 'string' ? pi : pi?.id) ?? '',
    amount: refund.amount,
    currency: refund.currency,
    status: refund.status ?? 'unknown',
    created: refund.created,
    operationId: refund.metadata?.operation_id ?? null,
    replayed,
  };
}
