// What each step's activity returns, with a schema the workflow checks it against: a result that
// does not fit (an older worker, an activity that returned nothing) stops the run honestly instead
// of failing its workflow task forever. Workflow code imports this module, so it stays pure.
import { z } from 'zod';
import type { RecoveryPolicy } from '../reliability/policy';
import { pinPolicy, type PinnedPolicy } from '../reliability/pinned-policy';
import type { Order } from '../domain/order';
import type { StepEvidence } from '../reliability/attempt-ledger';

const attemptSummarySchema = z.object({
  attempt: z.number().int(),
  startedAt: z.string(),
  finishedAt: z.string().nullable(),
  outcome: z.string().nullable(),
  transportRequests: z.number().int(),
});
/** A step's attempts as the ledger recorded them. */
export const ledgerSchema = z.array(attemptSummarySchema.passthrough());
const evidenceSchema = z.object({
  attempt: z.number().int().min(1),
  ledger: ledgerSchema,
});

export const refundReceiptSchema = z.object({
  refundId: z.string().min(1),
  paymentIntentId: z.string(),
  amount: z.number().int().positive(),
  currency: z.string(),
  status: z.string(),
  created: z.number(),
  /** metadata.operation_id on the provider's refund. */
  operationId: z.string().nullable(),
  /** True when the provider answered with a stored response for our idempotency key. */
  replayed: z.boolean(),
});
export type RefundReceipt = z.output<typeof refundReceiptSchema>;

export const orderReceiptSchema = z.object({
  orderId: z.string(),
  status: z.enum(['paid', 'partially_refunded', 'refunded']),
  refundedAmount: z.number().int(),
  version: z.number().int(),
  /** False when this operation had already been applied (or reverted) before this call. */
  changed: z.boolean(),
});
export type OrderReceipt = z.output<typeof orderReceiptSchema>;

export const notificationReceiptSchema = z.object({
  key: z.string(),
  messageId: z.string(),
  /** Masked: customer addresses never leave the activity in results or failure details. */
  recipient: z.string(),
  /** What the SMTP server answered; proves only that it accepted the message. */
  providerResponse: z.string(),
  /** True when the outbox already held a sent message for this key and nothing was sent. */
  alreadySent: z.boolean(),
});
export type NotificationReceipt = z.output<typeof notificationReceiptSchema>;

/** The provider's windows the workflow plans around, from the worker's configuration. */
export interface ProviderWindows {
  /** How long the provider keeps a key's response (Stripe: 24 h), less a safety margin. */
  dedupeWindowMs: number;
  /** How long after a request its refund may still be missing from list results. */
  consistencyMs: number;
  requestTimeoutMs: number;
}

export interface RunSettings {
  scope: string;
  policy: RecoveryPolicy;
  provider: ProviderWindows;
}

/** The settings as a run's history pins them: the policy whole, or as its changes from one the bundle ships. */
export type PinnedSettings = Omit<RunSettings, 'policy'> & PinnedPolicy;

export function pinSettings({ policy, ...rest }: RunSettings): PinnedSettings {
  return { ...rest, ...pinPolicy(policy) };
}

export const pinnedSettingsSchema = z
  .object({ scope: z.string(), provider: z.object({ dedupeWindowMs: z.number() }).passthrough() })
  .and(
    // One form or the other, never both (a pin must not be read two ways).
    z.union([
      z.object({ policy: z.object({ version: z.string() }).passthrough(), policyBase: z.never().optional() }),
      z.object({
        policyBase: z.string(),
        policyChanges: z.record(z.string(), z.unknown()),
        policy: z.never().optional(),
      }),
    ]),
  );

/**
 * What we know of an operation's effect at the provider:
 * intent: recorded, and no request has been proven to take effect (none may have been sent yet);
 * unknown: a request was sent and its outcome is not known: only reconciliation moves it on;
 * refunded / partial / failed: the provider's refund exists, for the full amount, for less, or failed;
 * rejected: refused before any effect; completed: the run passed its completion gate.
 */
export type OperationStatus = 'intent' | 'unknown' | 'refunded' | 'partial' | 'failed' | 'rejected' | 'completed';

export interface OperationRecord {
  operationId: string;
  orderId: string;
  operationVersion: number;
  scope: string;
  /** sha256 of the canonical request: the same operation id with another hash is a changed intent. */
  requestHash: string;
  request: { orderId: string; amount: number; currency: string; reason: string };
  status: OperationStatus;
  /** The provider's refund, once known (from its answer or from reconciliation). */
  refund: RefundReceipt | null;
  /** When the first and last create requests for this operation were sent, and how many. */
  firstSentAt: string | null;
  lastSentAt: string | null;
  /**
   * The latest any of its sends can still be on the wire, by the store's clock, as each sender's own
   * timeout bounds it; null if none was recorded (sends stamped before this was kept).
   */
  offTheWireBy: string | null;
  requestsSent: number;
  /** When reconciliation last proved that no refund exists for it. */
  absenceConfirmedAt: string | null;
  /**
   * How many of its sends that proof covers: absence is proven for the operation as it stands only
   * while this equals requestsSent. A count, not a time, so that clocks of different hosts never decide.
   */
  provenAbsentThrough: number | null;
  reason: string | null;
  createdAt: string;
  createdBy: string;
  updatedAt: string;
}

const operationSchema = z
  .object({ operationId: z.string(), status: z.string(), requestHash: z.string() })
  .passthrough();

export const beginResultSchema = z.object({
  order: z
    .object({ id: z.string(), paymentIntentId: z.string(), currency: z.string(), amount: z.number().int() })
    .passthrough(),
  operation: operationSchema,
  /** False when the operation was already recorded (a repeat, or the same refund under another workflow id). */
  created: z.boolean(),
  /** Why this order cannot take this refund; null when it can (or this operation's refund already exists). */
  problem: z.string().nullable(),
  /** Earlier operations on the same order whose effect the order may not show: settled before this one may send. */
  blockers: z.array(operationSchema),
  settings: pinnedSettingsSchema,
});
/** The result whole, as the activity returns it (the schema checks what the workflow reads). */
export type BeginResult = Omit<z.output<typeof beginResultSchema>, 'order' | 'operation' | 'blockers' | 'settings'> & {
  order: Order;
  operation: OperationRecord;
  blockers: OperationRecord[];
  settings: PinnedSettings;
};

export const reconcileResultSchema = z.object({
  result: z.enum(['completed', 'not_started_confirmed', 'not_found_inconclusive', 'partial', 'failed', 'unknown']),
  /** The refund found for the operation, when there is one. */
  refund: refundReceiptSchema.nullable(),
  /** How the provider was asked: by refund id, or by listing the payment intent's refunds. */
  method: z.enum(['retrieve', 'list']),
  /** Refunds looked at, and how many carried the operation id. */
  scanned: z.number().int(),
  matches: z.number().int(),
  /** Whether a resend with the same key would still be deduplicated by the provider. */
  insideDedupeWindow: z.boolean(),
  /** When a "not found" becomes conclusive (the last send's stamp + its request timeout + a clock margin + the provider's consistency window). */
  conclusiveAt: z.string().nullable(),
  /**
   * How many times the operation had been sent when this lookup looked: a fence set on its strength holds only if
   * nothing was sent since. Results recorded before this field existed read as -1: a fence conditioned on that never holds.
   */
  requestsSent: z.number().int().default(-1),
  note: z.string(),
});
export type ReconcileResult = z.output<typeof reconcileResultSchema>;
export type ReconcileOutcome = ReconcileResult['result'];

export const gateResultSchema = z.object({
  /** pass: every check agrees; pending: the provider has not settled the refund; refund_failed: it failed after acceptance. */
  verdict: z.enum(['pass', 'pending', 'refund_failed', 'mismatch']),
  refund: refundReceiptSchema,
  findings: z.array(
    z.object({
      check: z.enum(['provider_receipt', 'single_refund', 'order_refund_state', 'notification_state', 'audit_trail']),
      ok: z.boolean(),
      observed: z.string(),
    }),
  ),
  /** Other refunds carrying the operation id in the provider's list; results recorded before it have none. */
  otherRefundIds: z.array(z.string()).optional(),
});
export type GateResult = z.output<typeof gateResultSchema>;
export type GateFinding = GateResult['findings'][number];

const outboxEntrySchema = z.object({ key: z.string(), status: z.string(), messageId: z.string() });

/** What of the saga stands in the store for one operation: the compensation plan's input (compensations/plan.ts). */
export const standingRecordsSchema = z.object({
  /** The refund on the order, when this operation's update stands (reverted or not). */
  order: z.object({ refundId: z.string(), amount: z.number().int(), revertedByKey: z.string().nullable() }).nullable(),
  /** The customer notice's outbox entry, if one was made. */
  notice: outboxEntrySchema.nullable(),
  /** The correction's outbox entry; results recorded before it was read have none. */
  correction: outboxEntrySchema.nullish(),
});
export type StandingRecords = z.infer<typeof standingRecordsSchema>;

/** What a follow-up run learns of a refund reported failed after its run finished. */
export const followUpFactsSchema = z.object({
  request: z.object({ orderId: z.string(), amount: z.number().int(), currency: z.string(), reason: z.string() }),
  /** The refund as the provider has it now. */
  refund: refundReceiptSchema,
  failed: z.boolean(),
  ...standingRecordsSchema.shape,
  /** The worker's recovery policy: the follow-up's compensations run under it. */
  policy: z.object({ version: z.string() }).passthrough(),
  /** The operation's scope (CHECKOUT_REFUND_SCOPE: a checkout's refund of its charge); results recorded before it have none. */
  scope: z.string().optional(),
});
/** The facts with the policy whole, as the worker sends it (the schema checks only its version). */
export type FollowUpFacts = Omit<z.output<typeof followUpFactsSchema>, 'policy'> & { policy: RecoveryPolicy };

export type Evidenced<T> = T & { evidence: StepEvidence };

const withEvidence = new WeakMap<z.ZodObject, z.ZodObject>();

/**
 * A step result's schema, with the evidence every step result carries: built once per schema (a
 * workflow asks for it at every step, and building a schema costs far more than a parse).
 */
export function evidenced<S extends z.ZodObject>(schema: S) {
  let extended = withEvidence.get(schema) as ReturnType<typeof extend<S>> | undefined;
  if (!extended) withEvidence.set(schema, (extended = extend(schema)));
  return extended;
}

const extend = <S extends z.ZodObject>(schema: S) => schema.extend({ evidence: evidenceSchema });
