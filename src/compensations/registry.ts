// The refund saga's steps as definitions that execute: the call, its undo (or forward repair), what it depends on,
// who is asked when it fails for good. The saga, the docs' table, inspect and the follow-up read it. Pure: workflow code.
import type { CorrectionReason, RefundCorrectionInput } from '../activities/refund-correction';
import {
  beginResultSchema,
  gateResultSchema,
  notificationReceiptSchema,
  orderReceiptSchema,
  reconcileResultSchema,
  refundReceiptSchema,
  REFUND_STEPS,
  type RefundReceipt,
  type RefundStep,
} from '../contract';
import type { z } from 'zod';
import { checkRegistry } from '../saga/order';
import { defineCall, withCarriage, type StepCall } from '../saga/step';
import type { Boundary } from '../reliability/taxonomy';
import type { RefundRequest } from '../domain/refund-request';
import type { RevertRefundInput } from '../store/types';

// The steps' names are the contract's (part of every step key and of the decide Update): the registry describes them.
export { REFUND_STEPS, type RefundStep };

/** What a compensation's input is built from: the operation, its order, the refund, and why it is undone. */
export interface UndoContext {
  orderId: string;
  operationId: string;
  refund?: RefundReceipt;
  /** Why compensation is running, as the customer may read it. */
  correctionReason?: CorrectionReason;
}

/** Each compensation's input, as its activity takes it (named here, not read off RefundActivities: the activities import the plan). */
interface CompensationInputs {
  revertRefund: RevertRefundInput;
  sendRefundCorrection: RefundCorrectionInput;
}
type CompensationActivity = keyof CompensationInputs;

export interface Compensation<A extends CompensationActivity = CompensationActivity> {
  kind: 'compensation';
  activity: A;
  boundary: Boundary;
  /** The receipt it must return. */
  output: z.ZodObject;
  /** Builds the compensation's input under its own key (compensationKeyOf, plan.ts): never the forward step's key. */
  input(ctx: UndoContext, key: string): CompensationInputs[A];
}

type Undo = { kind: 'none' } | { kind: 'forward_repair'; note: string } | Compensation;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a registry holds steps of every input type
interface StepRegistration<A extends string = string, In = any> extends StepCall<A, In> {
  name: RefundStep;
  /** What the step does, as the docs' table says it. */
  action: string;
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
  /** Who is asked, and how, when the step fails for good (the policy's `decisions`); inspect shows it. */
  escalation: string;
}

const compensation = <A extends CompensationActivity>(c: Omit<Compensation<A>, 'kind'>) =>
  ({ kind: 'compensation', ...c }) as Compensation;

/** How a step that failed for good reaches a person: the policy's `decisions` say who may decide and what needs approval. */
const PARKED = 'the run parks as needs_attention and an operator decides';
const APPROVED = "needs a lead's approval (a second person with the approver role, within approvalTtlMs)";

/** A step's definition: its call, and what the docs and a person read of it. */
const step = <const A extends string, In = never>(registration: StepRegistration<A, In>) => registration;

export const REFUND_SAGA = withCarriage({
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
    // Written in the refund's receipt transaction when the saga goes on with it: one task and one commit fewer.
    carriedBy: 'create_refund',
    action: 'record the refund on the order (refunded amount, status) with an order_updated audit entry',
    boundary: 'store',
    onFailure: 'forward_repair',
    undo: compensation({
      activity: 'revertRefund',
      boundary: 'store',
      output: orderReceiptSchema,
      input: ({ orderId, operationId }, key) => ({ orderId, operationId, compensationKey: key }),
    }),
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
    boundary: 'smtp',
    onFailure: 'forward_repair',
    undo: compensation({
      activity: 'sendRefundCorrection',
      boundary: 'smtp',
      output: notificationReceiptSchema,
      input: ({ orderId, operationId, refund, correctionReason }, key) => {
        if (!refund) throw new Error('compensation needs the refund receipt, which the saga does not have');
        return { key, operationId, orderId, refundId: refund.refundId, reason: correctionReason ?? 'refund_failed' };
      },
    }),
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
    // A list, and a retrieve when the list does not show the refund yet: at most two.
    requestsPerAttempt: 2,
    firstReadIn: 'notify_customer',
    action:
      "check that the provider's receipt, the order, the outbox and the audit trail agree before the run says completed; poll while the refund is pending",
    boundary: 'stripe',
    onFailure: 'forward_repair',
    undo: { kind: 'none' },
    pointOfNoReturn: false,
    dependsOn: ['load_order', 'create_refund', 'update_order', 'notify_customer'],
    escalation: `a refund the provider failed after accepting it is compensated without asking; a disagreement, or a refund still pending after the polls: the refund stands, ${PARKED}: retry-step or abandon; a compensation that failed or is unknown parks too, and compensate again ${APPROVED}`,
  }),
} satisfies Record<RefundStep, StepRegistration>);

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
