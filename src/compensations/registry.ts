// The refund saga's steps as data: what each does and needs, what records it leaves, what makes
// it safe to repeat, how its effect is undone (or repaired forward) when a later step requires it,
// what it depends on and who is asked when it fails for good. The saga, the docs' table and the
// tests read it from here. Imported by workflow code, so it stays pure.
import type { CorrectionReason, RefundCorrectionInput } from '../activities/refund-correction';
import {
  beginResultSchema,
  gateResultSchema,
  notificationReceiptSchema,
  orderReceiptSchema,
  reconcileResultSchema,
  refundReceiptSchema,
  REFUND_STEPS,
  type NotificationReceipt,
  type OrderReceipt,
  type RefundReceipt,
  type RefundStep,
} from '../contract';
import type { z } from 'zod';
import { checkRegistry } from '../saga/order';
import { defineCall, type StepCall } from '../saga/step';
import type { Boundary } from '../reliability/taxonomy';
import type { Order } from '../domain/order';
import type { RefundRequest } from '../domain/refund-request';
import type { RevertRefundInput } from '../store/types';

// The steps' names are the contract's (part of every step key and of the decide Update): the registry describes them.
export { REFUND_STEPS, type RefundStep };

/** What the saga knows when it compensates: the request and the receipts of finished steps. */
export interface SagaContext {
  request: RefundRequest;
  operationId: string;
  order?: Order;
  refund?: RefundReceipt;
  /** The receipt of the refund the provider failed or canceled after accepting it, once the run learns of it. */
  failedRefund?: RefundReceipt;
  orderReceipt?: OrderReceipt;
  notice?: NotificationReceipt;
  /** Why compensation is running, as the customer may read it. */
  correctionReason?: CorrectionReason;
  /** Set when the provider refunded less than asked: what it refunded, for the record. */
  partialNote?: string;
}

/** The activities compensations may name; the workflow proxies exactly these for them. */
export type CompensationActivity = 'revertRefund' | 'sendRefundCorrection';
/** Each one's input, as its activity takes it (named here, not read off RefundActivities: the activities import the plan). */
interface CompensationInputs {
  revertRefund: RevertRefundInput;
  sendRefundCorrection: RefundCorrectionInput;
}
type ActivityInput<A extends CompensationActivity> = CompensationInputs[A];

export interface Compensation<A extends CompensationActivity = CompensationActivity> {
  kind: 'compensation';
  activity: A;
  boundary: Boundary;
  /** The receipt it must return. */
  output: z.ZodObject;
  /** The compensation's own idempotency key, as `compensationKeyOf` (plan.ts) derives it: never the forward step's key. */
  key: string;
  /** Builds the compensation's input; `key` is the compensation's own idempotency key. */
  input(ctx: SagaContext, key: string): ActivityInput<A>;
}

export type Undo = { kind: 'none' } | { kind: 'forward_repair'; note: string } | Compensation;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a registry holds steps of every input type
export interface StepRegistration<A extends string = string, In = any> extends StepCall<A, In> {
  name: RefundStep;
  /** What the step does. */
  action: string;
  /** What must hold before it runs; the step refuses, or is never reached, otherwise. */
  precondition: string;
  /** The records it leaves behind that prove what happened, for the completion gate and for a person. */
  record: string;
  /** Why running it again (a retry, a rerun, a reset) does not do it twice. */
  idempotency: string;
  /**
   * - `stop`: nothing irreversible happened before this step; a failure ends the run.
   * - `forward_repair`: the refund already happened and stands; finished steps stay, a person repairs forward.
   */
  onFailure: 'stop' | 'forward_repair';
  undo: Undo;
  /** Once this step may have taken effect, nothing before it is undone and it is never sent blind again. */
  pointOfNoReturn: boolean;
  /** Steps whose outputs this one uses: they run before it and are compensated after it. */
  dependsOn: RefundStep[];
  /** Who is asked, and how, when the step fails for good (the policy's `decisions`). */
  escalation: string;
}

function compensation<A extends CompensationActivity>(
  activity: A,
  boundary: Boundary,
  output: z.ZodObject,
  key: string,
  input: (ctx: SagaContext, key: string) => ActivityInput<A>,
): Compensation {
  return { kind: 'compensation', activity, boundary, output, key, input } as Compensation;
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`compensation needs ${what}, which the saga does not have`);
  return value;
}

/** How a step that failed for good reaches a person: the policy's `decisions` say who may decide and what needs approval. */
const PARKED = 'the run parks as needs_attention and an operator decides';
const APPROVED = "needs a lead's approval (a second person with the approver role, within approvalTtlMs)";

/** A step's definition: its call, and what the docs and a person read of it. */
const step = <const A extends string, In = never>(registration: StepRegistration<A, In>) => registration;

export const REFUND_SAGA = {
  load_order: step({
    name: 'load_order',
    effect: 'write',
    runs: 'local',
    output: beginResultSchema,
    activity: 'beginOperation',
    shows: ({ request }: { request: RefundRequest }) => ({
      orderId: request.orderId,
      operationVersion: request.operationVersion,
    }),
    action:
      "read the order and commit the operation's intent (operation id, request hash) before anything is sent; name earlier operations not yet settled",
    precondition:
      'a valid request; the order exists, is paid in the currency asked and has the amount left to refund; no later operation version exists',
    record:
      'the operation record (status, request hash) with its intent_committed audit entry; the attempt ledger under <operation>:load_order',
    idempotency:
      'store commitIntent by operation id + request hash: the same intent returns the record already there, another hash under the same id is refused (INVALID_ARGUMENTS)',
    boundary: 'store',
    onFailure: 'stop',
    undo: { kind: 'none' },
    pointOfNoReturn: false,
    dependsOn: [],
    escalation: `a refusal (order missing, too much asked) ends the run rejected, nobody is asked; otherwise ${PARKED}: retry-step or abandon, no approval needed`,
  }),
  // The point of no return: once a refund may exist, nothing before it is ever undone and it is never sent again.
  create_refund: step({
    name: 'create_refund',
    effect: 'send',
    runs: 'effects',
    output: refundReceiptSchema,
    activity: 'createRefund',
    key: (input: { idempotencyKey: string }) => input.idempotencyKey,
    action: 'create one Stripe refund of the amount on the payment intent, with metadata.operation_id',
    precondition:
      "the intent is committed; no earlier operation of the order is unsettled; the operation has no refund on record; a resend is inside the key's dedupe window or after reconciliation proved no refund exists",
    record:
      "the Stripe refund id and receipt on the operation record (refund_confirmed audit entry with the provider request id); the attempt ledger with each request and its provider request id; the record's requests_sent, first/last_sent_at and proven_absent_through",
    idempotency:
      'Stripe Idempotency-Key <operation>:create_refund on every send, resent only inside its dedupe window; an unknown outcome is reconciled by metadata.operation_id (or the refund id), never resent blind; a receipt on record is replayed without a request',
    boundary: 'stripe',
    onFailure: 'stop',
    undo: {
      kind: 'forward_repair',
      note: 'a refund cannot be undone: later steps are repaired forward, and a refund is never sent again',
    },
    pointOfNoReturn: true,
    dependsOn: ['load_order'],
    escalation: `an unknown outcome is reconciled with the provider first; then ${PARKED}: retry-step (it looks the refund up before it sends) ${APPROVED}, or abandon`,
  }),
  update_order: step({
    name: 'update_order',
    effect: 'write',
    runs: 'local',
    output: orderReceiptSchema,
    activity: 'applyRefund',
    key: (input: { key: string }) => input.key,
    // Recording a refund that happened is never refused for spent retry time or provider calls.
    essential: true,
    action: 'record the refund on the order (refunded amount, status) with an order_updated audit entry',
    precondition:
      'the refund exists at the provider with a receipt (the full amount, or the partial amount being repaired forward)',
    record:
      "the order's order_refunds row (refund id, amount, prior amount and status, applied version) and its order_updated audit entry; the attempt ledger under <operation>:update_order",
    idempotency:
      "store applyRefund idempotent by operation id (a second apply returns the first receipt, one with other parameters is refused) and optimistic on the order's version (a conflict reloads and applies again)",
    boundary: 'store',
    onFailure: 'forward_repair',
    undo: compensation(
      'revertRefund',
      'store',
      orderReceiptSchema,
      'compensationKey(stepKey(operation, update_order)) = <operation>:update_order:compensate; the store keeps it as reverted_by_key',
      (ctx, key) => ({ orderId: ctx.request.orderId, operationId: ctx.operationId, compensationKey: key }),
    ),
    pointOfNoReturn: false,
    dependsOn: ['create_refund'],
    escalation: `the refund stands; ${PARKED}: retry-step, no approval needed, or abandon and repair the order by hand`,
  }),
  notify_customer: step({
    name: 'notify_customer',
    effect: 'send',
    runs: 'effects',
    output: notificationReceiptSchema,
    activity: 'sendRefundNotice',
    key: (input: { key: string }) => input.key,
    action: 'email the customer that the refund was issued (the address is read from the order, never from history)',
    precondition: 'a full refund exists (a partial one freezes the email); the order exists',
    record:
      "the outbox entry under <operation>:notify_customer (pending → sending → sent) with its deterministic Message-ID and the SMTP server's acceptance response, and its notification_sent audit entry; the attempt ledger",
    idempotency:
      'email outbox keyed by <operation>:notify_customer, pending → sending as the hand-over lock; the Message-ID is derived from the key, so any resend carries the same one; a notice already sent is replayed',
    boundary: 'smtp',
    onFailure: 'forward_repair',
    undo: compensation(
      'sendRefundCorrection',
      'smtp',
      notificationReceiptSchema,
      'compensationKey(stepKey(operation, notify_customer)) = <operation>:notify_customer:compensate: its own outbox entry and Message-ID',
      (ctx, key) => ({
        key,
        operationId: ctx.operationId,
        orderId: ctx.request.orderId,
        refundId: need(ctx.refund, 'the refund receipt').refundId,
        reason: ctx.correctionReason ?? 'refund_failed',
      }),
    ),
    pointOfNoReturn: false,
    dependsOn: ['create_refund'],
    escalation: `the refund stands; ${PARKED}: an unknown hand-over is quarantined until a person looks for its Message-ID in the mailbox; retry-step (resends it with the same Message-ID) ${APPROVED}, or abandon`,
  }),
  completion_gate: step({
    name: 'completion_gate',
    effect: 'read',
    runs: 'reconcile',
    output: gateResultSchema,
    activity: 'checkCompletion',
    // A retrieve and a list.
    requestsPerAttempt: 2,
    action:
      "check that the provider's receipt, the order, the outbox and the audit trail agree before the run says completed; poll while the refund is pending",
    precondition: 'every earlier step completed: a refund receipt, the order updated, the notice sent',
    record:
      'its findings per check (provider_receipt, single_refund, order_refund_state, notification_state, audit_trail); the operation record settled completed (or failed); provider reads in the ledger under <operation>:create_refund#gate',
    idempotency:
      'a read of the provider, the order, the outbox and the audit trail; the operation record it settles (completed or failed) only moves forward, so a repeat changes nothing',
    boundary: 'stripe',
    onFailure: 'forward_repair',
    undo: { kind: 'none' },
    pointOfNoReturn: false,
    dependsOn: ['load_order', 'create_refund', 'update_order', 'notify_customer'],
    escalation: `a refund the provider failed after accepting it is compensated without asking; a disagreement, or a refund still pending after the polls: the refund stands, ${PARKED}: retry-step or abandon; a compensation that failed or is unknown parks too, and compensate again ${APPROVED}`,
  }),
} satisfies Record<RefundStep, StepRegistration>;

/** A person's word that a notice whose hand-over is unknown was delivered: the confirm-delivered decision's call. */
export const CONFIRM_DELIVERED = {
  name: 'notify_customer' as const,
  ...defineCall({
    boundary: 'store',
    effect: 'write',
    runs: 'effects',
    output: notificationReceiptSchema,
    activity: 'confirmNoticeDelivered',
    key: (input: { key: string }) => input.key,
    essential: true,
  }),
};

/** One lookup of a refund whose outcome is unknown, outside the step table. */
export const RECONCILE_LOOKUP = defineCall({
  boundary: 'stripe',
  effect: 'read',
  runs: 'reconcile',
  output: reconcileResultSchema,
  activity: 'reconcileRefund',
});

// A registry that breaks its own rules fails when the module loads: the worker does not start.
checkRegistry(REFUND_SAGA);
