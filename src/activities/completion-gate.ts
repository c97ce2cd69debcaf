// The completion gate: before a run may say "completed", the provider's receipt, the order's refund, the notice and
// the audit trail must agree. What a step returned is never evidence on its own.
import type Stripe from 'stripe';
import { lookupKey, type Evidenced, type GateFinding, type GateResult } from '../contract';
import { recordingEffect, stepCall, type Attempt, type Within } from './attempt';
import type { FirstLook } from './first-read';
import { paymentFailure } from './stripe-failures';
import type { StripeDeps } from './stripe-client';
import { listRefunds, providerFailed, refundIdsOf, settleProviderFailure, toReceipt } from './stripe-refunds';

export interface CheckCompletionInput {
  operationId: string;
  orderId: string;
  paymentIntentId: string;
  refundId: string;
  /** What the operation asked for: the receipt must match it, not merely itself. */
  amount: number;
  currency: string;
  /** The customer notice's key (its outbox entry). */
  noticeKey: string;
  /** The create step's key: the gate's provider reads are kept in the attempt ledger under `<key>#gate`. */
  idempotencyKey: string;
  /** A signed provider event that says the refund succeeded stands for the receipt (no poll); one not held is ignored. */
  providerEventId?: string;
}

/** Audit events a completed operation must have, in this order. */
const REQUIRED_TRAIL = ['intent_committed', 'order_updated', 'notification_sent'] as const;

export function createCompletionGate(deps: StripeDeps) {
  const { store } = deps;

  /** The gate's reads at Stripe are kept in the attempt ledger under the create step's key, `<key>#gate`. */
  const gateCall = (input: CheckCompletionInput) =>
    stepCall('completion_gate', { ...input, key: lookupKey(input.idempotencyKey, 'gate') }, 'stripe');

  /** One look by the gate: its own task's attempt, or (`within`) its first, inside the notice's activity. */
  function look(input: CheckCompletionInput, within?: Within): Promise<Evidenced<GateResult>> {
    return deps.attempt(gateCall(input), paymentFailure(false), (attempt) => examine(input, attempt), within);
  }

  async function examine(input: CheckCompletionInput, attempt: Attempt): Promise<GateResult> {
    const stripe = deps.stripe(attempt);
    const findings: GateFinding[] = [];
    const check = (name: GateFinding['check'], ok: boolean, observed: string) =>
      findings.push({ check: name, ok, observed });

    // The provider's list first, beside the store's read: it shows the run's refund as a retrieve would, and any
    // other carrying the operation id. Each read is waited for, even once one has failed, so that no request outlives
    // the attempt that counts it.
    const [listed, event, { applied, notice, trail }] = await allOrFirstError([
      listRefunds(stripe, input.paymentIntentId),
      // The provider's signed event stands for the refund, when the run was handed one that fits.
      signedSuccess(input),
      // The whole trail: the checks below look for several events, and report how many entries it holds.
      store.completionRecords(input.operationId, input.noticeKey),
    ] as const);
    // Retrieved only when the list does not show it yet (a list may lag): one request a look, not two.
    const refund =
      event ?? listed.find((r) => r.id === input.refundId) ?? (await stripe.refunds.retrieve(input.refundId));
    const receipt = event ? event.receipt : toReceipt(refund as Stripe.Refund, false);
    const fits =
      refund.amount === input.amount &&
      refund.currency === input.currency &&
      refund.metadata?.operation_id === input.operationId;
    check(
      'provider_receipt',
      fits && refund.status === 'succeeded',
      `refund ${refund.id}: ${refund.status}, ${refund.amount} ${refund.currency}, operation ${refund.metadata?.operation_id ?? '(none)'}${event ? `, by signed event ${event.eventId}` : ''}`,
    );

    // A lagging list may not show ours yet; more than one is never right.
    const mine = refundIdsOf(listed, input.operationId);
    const single = mine.length <= 1 && mine.every((id) => id === refund.id);
    check(
      'single_refund',
      single,
      `${mine.length} refund(s) with this operation id in the provider's list: ${mine.join(', ') || 'none listed yet'}`,
    );

    check(
      'order_refund_state',
      applied?.refundId === refund.id && applied.amount === input.amount && applied.revertedByKey === null,
      applied
        ? `order ${applied.orderId} records ${applied.refundId} for ${applied.amount}${applied.revertedByKey ? `, reverted by ${applied.revertedByKey}` : ''}`
        : 'the order records no refund for this operation',
    );

    // Sent on a person's word (confirm-delivered) passes too, and says so: the server's answer never came.
    const byPerson = trail.find(
      (e) =>
        e.event === 'notification_sent' && e.detail.key === input.noticeKey && typeof e.detail.confirmedBy === 'string',
    );
    const onWord = byPerson
      ? `: delivery confirmed by ${String(byPerson.detail.confirmedBy)} (${String(byPerson.detail.reason)})`
      : '';
    check(
      'notification_state',
      notice?.status === 'sent',
      notice ? `notice ${notice.messageId} is ${notice.status}${onWord}` : 'no notice in the outbox',
    );

    const events = trail.map((e) => e.event);
    const confirmed =
      events.includes('refund_confirmed') ||
      trail.some((e) => e.event === 'reconciled' && e.detail.result === 'completed');
    const missing = [...REQUIRED_TRAIL.filter((e) => !events.includes(e)), ...(confirmed ? [] : ['refund_confirmed'])];
    check(
      'audit_trail',
      missing.length === 0,
      missing.length === 0 ? `${trail.length} audit entries, none missing` : `missing ${missing.join(', ')}`,
    );

    let verdict: GateResult['verdict'] = findings.every((f) => f.ok) ? 'pass' : 'mismatch';
    // An anomaly (a refund that does not fit, another carrying the operation id) always wins: waiting or undoing on it could be wrong.
    const anomaly = !fits || !single;
    if (!anomaly && (refund.status === 'pending' || refund.status === 'requires_action')) verdict = 'pending';
    if (!anomaly && providerFailed(refund)) verdict = 'refund_failed';
    const { operationId } = input;
    const { actor } = attempt;
    const completed = { status: 'completed' as const, refund: receipt };
    const settle = () => store.operations.settle(operationId, completed, actor, 'completion_gate_passed');
    if (verdict === 'pass') await recordingEffect(attempt, settle);
    if (verdict === 'refund_failed') {
      const event = 'refund_failed_after_acceptance';
      await settleProviderFailure(store.operations, refund, receipt, { operationId, actor, event });
    }
    return { verdict, refund: receipt, findings, otherRefundIds: mine.filter((id) => id !== refund.id) };
  }

  /** The provider's signed word that the refund succeeded, as the receiver recorded it, when the run was handed one. */
  async function signedSuccess(input: CheckCompletionInput) {
    if (!input.providerEventId) return undefined;
    const [event, op] = await Promise.all([
      store.providerEvents.get(input.providerEventId),
      store.operations.get(input.operationId),
    ]);
    if (!event || !op?.refund || event.operationId !== input.operationId || event.refundId !== input.refundId)
      return undefined;
    const { eventId, refundId: id, refundStatus: status, amount, currency, operationId } = event;
    if (status !== 'succeeded' || amount === null || currency === null) return undefined;
    const receipt = { ...op.refund, status, amount, currency, replayed: false };
    return { eventId, id, status, amount, currency, metadata: { operation_id: operationId }, receipt };
  }

  return {
    checkCompletion: (input: CheckCompletionInput) => look(input),
    /** The gate's first look, made by the notice's activity once the notice is recorded sent. */
    firstLook: { call: gateCall, look } satisfies FirstLook<CheckCompletionInput>,
  };
}

type Settled<T extends readonly unknown[]> = { -readonly [K in keyof T]: Awaited<T[K]> };

/** Every promise's value once all have settled; if any failed, the first failure in the list's order. */
async function allOrFirstError<T extends readonly unknown[]>(promises: T): Promise<Settled<T>> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as Settled<T>;
}
