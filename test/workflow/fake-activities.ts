// In-memory fakes of the refund run's activities: one order, a provider that keeps refunds by
// operation id, an outbox and an audit trail, all in a plain object a test reads and scripts. No
// Stripe, SMTP or store server: the workflow's decisions are what the workflow tier tests.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { RefundActivities } from '../../src/activities';
import { pinSettings, type RunSettings } from '../../src/contract';
import type { StepEvidence } from '../../src/reliability/attempt-ledger';
import type { RecoveryPolicy } from '../../src/reliability/policy';
import type { Certainty, FailureCode } from '../../src/reliability/taxonomy';
import { TEST_POLICY } from '../helpers/runs';

type Acts = RefundActivities;
export type In<K extends keyof Acts> = Parameters<Acts[K]>[0];
type Out<K extends keyof Acts> = Awaited<ReturnType<Acts[K]>>;
type Refund = Out<'createRefund'>;

export interface FakeOrder {
  id: string;
  paymentIntentId: string;
  amount: number;
  refundedAmount: number;
  currency: string;
}

export interface World {
  order: FakeOrder;
  /** Every activity call, in order, with its input. */
  calls: { name: keyof Acts; input: unknown }[];
  /** Refunds at the provider; `refundStatus` is what a new one gets. */
  refunds: Omit<Refund, 'evidence'>[];
  refundStatus: string;
  /** What the provider later makes of the refund, as the completion gate reads it (e.g. failed after accepting it). */
  settlesAs: string | null;
  /** The refund on the order, and who reverted it. */
  orderUpdate: { refundId: string; amount: number; revertedByKey: string | null } | null;
  notice: { key: string; status: string; messageId: string } | null;
  correction: { key: string; status: string; messageId: string } | null;
  audit: { status: string; reason: string; event?: string; detail?: Record<string, unknown> }[];
  settings: RunSettings;
  /**
   * Whether the notice's activity makes the gate's first look when asked (a worker of this build; unset: an older
   * one), and what it hands back: the look as made, one the workflow cannot use, or the ledger of one that failed.
   */
  readsFirst?: 'fits' | 'unusable' | 'failed';
}

/** What one attempt left in the ledger: as the real attempt runner reports it. */
const evidence = (transportRequests: number): StepEvidence => {
  const at = new Date().toISOString();
  // Earlier attempts of this activity failed (the retry policy ran it again): the ledger lists them, as the real runner does.
  const attempt = Context.current().info.attempt;
  const summary = (n: number) => ({
    attempt: n,
    startedAt: at,
    finishedAt: at,
    outcome: n === attempt ? 'ok' : 'TRANSIENT_DEPENDENCY',
    certainty: null,
    reason: null,
    transportRequests,
    retryAfterMs: null,
    nextDelayMs: null,
    providerRequestId: null,
  });
  return { attempt, ledger: Array.from({ length: attempt }, (_, i) => summary(i + 1)) };
};

/** A failure as our activities raise it: the classification in its details, final unless `retryable`. */
export function failure(
  code: FailureCode,
  certainty: Certainty,
  reason: string,
  opts: { retryable?: boolean; provider?: Record<string, unknown> } = {},
): ApplicationFailure {
  return ApplicationFailure.create({
    type: code,
    message: `${code}: ${reason}`,
    nonRetryable: !opts.retryable,
    details: [
      {
        code,
        certainty,
        reason,
        boundary: 'stripe',
        operationId: null,
        attempt: 1,
        retryAfterMs: null,
        nextDelayMs: null,
        providerRequestId: null,
        provider: opts.provider ?? {},
        ledger: [],
      },
    ],
  });
}

export function newWorld(orderId: string, policy: RecoveryPolicy = TEST_POLICY): World {
  return {
    order: { id: orderId, paymentIntentId: `pi_${orderId}`, amount: 5000, refundedAmount: 0, currency: 'usd' },
    calls: [],
    refunds: [],
    refundStatus: 'succeeded',
    settlesAs: null,
    orderUpdate: null,
    notice: null,
    correction: null,
    audit: [],
    settings: {
      scope: 'test',
      policy,
      provider: { dedupeWindowMs: 24 * 3600_000, consistencyMs: 300, requestTimeoutMs: 2000 },
    },
  };
}

const notImplemented = (name: string) => async () => {
  throw ApplicationFailure.nonRetryable(`${name} is not faked in the workflow tier`, 'NOT_FAKED');
};

/** A replacement for one fake: `next` runs the fake itself (so a script can fail once, then answer as usual). */
export type Override = (input: never, next: () => Promise<unknown>) => Promise<unknown>;

/** The activities over `world`; `over` replaces any of them (a failure, a scripted answer). */
export function fakeActivities(world: World, over: Partial<Record<keyof Acts, Override>> = {}): Acts {
  const order = () => world.order;
  const receipt = (r: Omit<Refund, 'evidence'>, replayed: boolean, requests: number): Refund => ({
    ...r,
    replayed,
    evidence: evidence(requests),
  });
  const real = {
    async beginOperation({ request }: In<'beginOperation'>) {
      const o = order();
      if (request.orderId !== o.id) throw failure('PERMANENT_BUSINESS', 'not_executed', 'order_not_found');
      const operationId = `refund:${world.settings.scope}:${o.id}:v${request.operationVersion ?? 1}`;
      const own = world.refunds.find((r) => r.operationId === operationId) ?? null;
      const left = o.amount - o.refundedAmount;
      const now = new Date().toISOString();
      return {
        order: {
          id: o.id,
          paymentIntentId: o.paymentIntentId,
          customerEmail: `c***@example.test`,
          currency: o.currency,
          amount: o.amount,
          refundedAmount: o.refundedAmount,
          status: 'paid',
          version: 1,
        },
        operation: {
          operationId,
          orderId: o.id,
          operationVersion: request.operationVersion ?? 1,
          scope: world.settings.scope,
          requestHash: 'f'.repeat(64),
          request: { orderId: o.id, amount: request.amount, currency: request.currency, reason: request.reason },
          status: own ? 'refunded' : 'intent_committed',
          refund: own,
          firstSentAt: null,
          lastSentAt: null,
          offTheWireBy: null,
          requestsSent: 0,
          absenceConfirmedAt: null,
          provenAbsentThrough: null,
          reason: null,
          createdAt: now,
          createdBy: 'test',
          updatedAt: now,
        },
        created: world.calls.filter((c) => c.name === 'beginOperation').length === 1,
        problem:
          !own && request.amount > left ? `refund of ${request.amount} exceeds the ${left} still refundable` : null,
        blockers: [],
        // Pinned as a worker pins them: the test policy as its changes from the shipped default.
        settings: pinSettings(world.settings),
        evidence: evidence(0),
      };
    },
    async createRefund(input: In<'createRefund'>) {
      const existing = world.refunds.find((r) => r.operationId === input.operationId);
      if (existing) return receipt(existing, true, 1);
      const r = {
        refundId: `re_${world.refunds.length + 1}_${input.orderId}`,
        paymentIntentId: input.paymentIntentId,
        amount: input.amount,
        currency: input.currency,
        status: world.refundStatus,
        created: 1,
        operationId: input.operationId,
        replayed: false,
      };
      world.refunds.push(r);
      return receipt(r, false, 1);
    },
    async reconcileRefund(input: In<'reconcileRefund'>) {
      const found = world.refunds.find((r) => r.operationId === input.operationId) ?? null;
      return {
        result: found ? (found.status === 'failed' ? 'failed' : 'completed') : 'not_started_confirmed',
        refund: found && { ...found, replayed: false },
        method: 'list',
        scanned: world.refunds.length,
        matches: found ? 1 : 0,
        insideDedupeWindow: true,
        conclusiveAt: null,
        requestsSent: 1,
        note: found ? `found ${found.refundId}` : 'no refund carries the operation id',
        evidence: evidence(1),
      } as Out<'reconcileRefund'>;
    },
    async applyRefund(input: In<'applyRefund'>) {
      const changed = world.orderUpdate === null;
      if (changed) {
        world.orderUpdate = { refundId: input.refundId, amount: input.amount, revertedByKey: null };
        world.order.refundedAmount += input.amount;
      }
      const o = order();
      return {
        orderId: o.id,
        status: o.refundedAmount >= o.amount ? 'refunded' : 'partially_refunded',
        refundedAmount: o.refundedAmount,
        version: 2,
        changed,
        evidence: evidence(0),
      } as Out<'applyRefund'>;
    },
    async revertRefund(input: In<'revertRefund'>) {
      const u = world.orderUpdate;
      const changed = !!u && u.revertedByKey === null;
      if (u && changed) {
        u.revertedByKey = input.compensationKey;
        world.order.refundedAmount -= u.amount;
      }
      return {
        orderId: order().id,
        status: 'paid',
        refundedAmount: order().refundedAmount,
        version: 3,
        changed,
        evidence: evidence(0),
      } as Out<'revertRefund'>;
    },
    async sendRefundNotice(input: In<'sendRefundNotice'>) {
      const alreadySent = world.notice?.status === 'sent';
      world.notice = { key: input.key, status: 'sent', messageId: `<${input.key}@test.local>` };
      const receipt = {
        key: input.key,
        messageId: world.notice.messageId,
        recipient: 'c***@example.test',
        providerResponse: '250 OK',
        alreadySent,
        evidence: evidence(alreadySent ? 0 : 1),
      };
      const asked = world.readsFirst && input.read;
      if (!asked) return receipt;
      const read = asked.input as In<'checkCompletion'>;
      const look = (await real.checkCompletion(read)) as Out<'checkCompletion'>;
      if (world.readsFirst === 'failed') {
        const failed = look.evidence.ledger.map((row) => ({ ...row, outcome: 'TRANSIENT_DEPENDENCY', startedAt: 'x' }));
        return { ...receipt, read: { completion_gate: { failed } } };
      }
      const output = world.readsFirst === 'unusable' ? { ...look, verdict: 'maybe' } : look;
      return { ...receipt, read: { completion_gate: { output } } };
    },
    async sendRefundCorrection(input: In<'sendRefundCorrection'>) {
      world.correction = { key: input.key, status: 'sent', messageId: `<${input.key}@test.local>` };
      return {
        key: input.key,
        messageId: world.correction.messageId,
        recipient: 'c***@example.test',
        providerResponse: '250 OK',
        alreadySent: false,
        evidence: evidence(1),
      };
    },
    async confirmNoticeDelivered(input: In<'confirmNoticeDelivered'>) {
      const messageId = world.notice?.messageId ?? `<${input.key}@test.local>`;
      world.notice = { key: input.key, status: 'sent', messageId };
      return {
        key: input.key,
        messageId,
        recipient: 'c***@example.test',
        providerResponse: `confirmed by ${input.by}`,
        alreadySent: true,
        evidence: evidence(0),
      };
    },
    async checkCompletion(input: In<'checkCompletion'>) {
      const r = world.refunds.find((x) => x.refundId === input.refundId)!;
      if (world.settlesAs) r.status = world.settlesAs;
      const verdict = r.status === 'succeeded' ? 'pass' : r.status === 'pending' ? 'pending' : 'refund_failed';
      return {
        verdict,
        refund: { ...r, replayed: false },
        findings: [{ check: 'provider_receipt', ok: verdict === 'pass', observed: r.status }],
        otherRefundIds: [],
        evidence: evidence(2),
      } as Out<'checkCompletion'>;
    },
    async standingRecords() {
      return { order: world.orderUpdate, notice: world.notice, correction: world.correction };
    },
    async recordOutcome(input: In<'recordOutcome'>) {
      world.audit.push({
        status: input.status,
        reason: input.reason,
        ...(input.event && { event: input.event }),
        ...(input.detail && { detail: input.detail }),
      });
    },
    async decisionPolicy() {
      return world.settings.policy.decisions;
    },
    async handToFollowUp() {
      return undefined;
    },
    examineLateFailure: notImplemented('examineLateFailure'),
    sendDigest: notImplemented('sendDigest'),
    takeQueued: notImplemented('takeQueued'),
    recordStarts: notImplemented('recordStarts'),
    listAttention: notImplemented('listAttention'),
    sweepUnknown: notImplemented('sweepUnknown'),
  } as unknown as Record<keyof Acts, (input: unknown) => Promise<unknown>>;
  const logged = Object.fromEntries(
    Object.entries(real).map(([name, fn]) => [
      name,
      (input: unknown) => {
        world.calls.push({ name: name as keyof Acts, input });
        const replaced = over[name as keyof Acts] as
          ((i: unknown, next: () => Promise<unknown>) => Promise<unknown>) | undefined;
        return replaced ? replaced(input, () => fn(input)) : fn(input);
      },
    ]),
  );
  return logged as unknown as Acts;
}

/** The names of the calls made, in order (optionally only some). */
export const callNames = (world: World, only?: (keyof Acts)[]) =>
  world.calls.map((c) => c.name).filter((n) => !only || only.includes(n));
