// Every id and key both sides of Temporal derive, each with its parser: one builder and one parser
// per id, so no caller re-derives one with a regex of its own. An operation is the business intent
// (which order, which operation version, in which provider scope), never the workflow id: a run
// started under another workflow id is still the same operation, so it derives the same keys. Keys
// are derived in workflow code, never minted inside an activity, where a retry would mint another.
import { MESSAGE_ID_DOMAIN } from '../reliability/redaction';
import type { DecisionInput } from './decision';
import type { RefundRunState } from './run-state';
import { sha256Hex } from './sha256';

/** Letters, digits, "_" and "-": safe inside keys, Message-IDs and metadata. */
export const SCOPE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** The business key: one refund workflow id per order and operation version, `refund-<order>-v<n>`. */
export function refundWorkflowId(orderId: string, operationVersion: number): string {
  return `refund-${orderId}-v${operationVersion}`;
}

/** The order and operation version of a refund workflow id; undefined for a run started under another id. */
export function parseRefundWorkflowId(workflowId: string): { orderId: string; operationVersion: number } | undefined {
  const m = /^refund-([A-Za-z0-9][A-Za-z0-9_-]*)-v(\d+)$/.exec(workflowId);
  return m ? { orderId: m[1], operationVersion: Number(m[2]) } : undefined;
}

/** `refund:<scope>:<order>:v<n>`, e.g. `refund:local:ord_1:v1`. */
export function operationId(scope: string, orderId: string, operationVersion: number): string {
  return `refund:${scope}:${orderId}:v${operationVersion}`;
}

export function parseOperationId(id: string): { scope: string; orderId: string; operationVersion: number } | undefined {
  const m = /^refund:([^:]+):([^:]+):v(\d+)$/.exec(id);
  return m ? { scope: m[1], orderId: m[2], operationVersion: Number(m[3]) } : undefined;
}

/** The idempotency key of one step of an operation. */
export function stepKey(operationId: string, step: string): string {
  return `${operationId}:${step}`;
}

/** The operation and step of a step key; undefined for any other key (a compensation's among them). */
export function parseStepKey(key: string): { operationId: string; step: string } | undefined {
  const m = /^(refund:[^:]+:[^:]+:v\d+):([^:]+)$/.exec(key);
  return m && m[2] !== COMPENSATE ? { operationId: m[1], step: m[2] } : undefined;
}

const COMPENSATE = 'compensate';

/** A compensation is a new side effect with its own key, distinct from the step it undoes. */
export function compensationKey(forwardKey: string): string {
  return `${forwardKey}:${COMPENSATE}`;
}

/** The forward key a compensation key undoes; undefined when `key` is not a compensation's. */
export function parseCompensationKey(key: string): { forwardKey: string } | undefined {
  const suffix = `:${COMPENSATE}`;
  return key.endsWith(suffix) && key.length > suffix.length ? { forwardKey: key.slice(0, -suffix.length) } : undefined;
}

/**
 * Lookups at the provider that record attempts of their own beside a step's: reconciliation and the
 * completion gate under the step's key, the follow-up's look at a refund that failed later.
 */
export const LOOKUPS = ['reconcile', 'gate', 'follow-up'] as const;
export type Lookup = (typeof LOOKUPS)[number];

/** The attempt-ledger key of a lookup for the step keyed `forwardKey`: `<key>#reconcile`. */
export function lookupKey(forwardKey: string, lookup: Lookup): string {
  return `${forwardKey}#${lookup}`;
}

export function parseLookupKey(key: string): { forwardKey: string; lookup: Lookup } | undefined {
  const m = /^(.+)#([a-z-]+)$/.exec(key);
  const lookup = LOOKUPS.find((l) => l === m?.[2]);
  return m && lookup ? { forwardKey: m[1], lookup } : undefined;
}

/** A key made of [A-Za-z0-9_-] segments joined by ":" maps readably into a Message-ID. */
const READABLE_KEY = /^[A-Za-z0-9_-]+(:[A-Za-z0-9_-]+)*$/;

/**
 * The Message-ID for an operation key: the same key always yields the same id, so the mailbox can be searched for it.
 * Readable keys map readably; anything else gets a hash so two keys never share an id.
 */
export function messageIdForKey(key: string): string {
  if (READABLE_KEY.test(key) && key.length <= 200) return `<${key.replace(/:/g, '.')}@${MESSAGE_ID_DOMAIN}>`;
  const hash = sha256Hex(key).slice(0, 16);
  const readable = key.replace(/[^A-Za-z0-9_-]+/g, '-').slice(0, 120);
  return `<${readable}=${hash}@${MESSAGE_ID_DOMAIN}>`;
}

/**
 * The key a Message-ID was built from: `{ key }` for a readable one, `{ hashed }` (the readable
 * part) for a hashed one, whose key cannot be read back; undefined for a Message-ID not ours.
 */
export function parseMessageId(messageId: string): { key: string } | { hashed: string } | undefined {
  const m = /^<(.+)@([^@]+)>$/.exec(messageId);
  if (!m || m[2] !== MESSAGE_ID_DOMAIN) return undefined;
  const hashed = /^(.*)=[0-9a-f]{16}$/.exec(m[1]);
  if (hashed) return { hashed: hashed[1] };
  const key = m[1].replace(/\./g, ':');
  return READABLE_KEY.test(key) ? { key } : undefined;
}

const FOLLOW_UP_PREFIX = 'follow-up:';

/** One follow-up per operation: a redelivered or repeated failure finds it, or a new run finds the work done. */
export function followUpWorkflowId(operationId: string): string {
  return `${FOLLOW_UP_PREFIX}${operationId}`;
}

/** The operation a follow-up workflow id follows up; undefined for any other workflow id. */
export function parseFollowUpWorkflowId(workflowId: string): { operationId: string } | undefined {
  return workflowId.startsWith(FOLLOW_UP_PREFIX) && workflowId.length > FOLLOW_UP_PREFIX.length
    ? { operationId: workflowId.slice(FOLLOW_UP_PREFIX.length) }
    : undefined;
}

/** The `decide` Update's id for the scheduled sweep's reconcile request: one per occurrence, so a re-run asks no run twice. */
export function sweepUpdateId(occurrenceId: string): string {
  return `reconcile:${occurrenceId}`;
}

export function parseSweepUpdateId(updateId: string): { occurrenceId: string } | undefined {
  const m = /^reconcile:(.+)$/.exec(updateId);
  // A person's reconcile decision starts alike: it is not the sweep's.
  return m && !parseDecisionUpdateId(updateId) ? { occurrenceId: m[1] } : undefined;
}

/**
 * The `decide` Update's id for a person's decision, from the run's state: the same decision on the
 * same parking is one Update however often it is sent. After a rejected proposal the same decision
 * may be proposed anew, so the decisions so far are part of it.
 */
export function decisionUpdateId(input: DecisionInput, state: Pick<RefundRunState, 'decisions' | 'parked'>): string {
  if (input.decision === 'approve' || input.decision === 'reject') {
    const pending = state.decisions.find((d) => d.outcome === 'awaiting_approval');
    return `${input.decision}:proposal-${pending?.seq ?? 'none'}`;
  }
  return `${input.decision}${input.step ? `:${input.step}` : ''}:parked-${state.parked?.since ?? 'not-parked'}:after-${state.decisions.length}`;
}

/** The decision (and step) a decision's Update id names; undefined for any other id. */
export function parseDecisionUpdateId(updateId: string): { decision: string; step?: string } | undefined {
  const proposal = /^(approve|reject):proposal-(\d+|none)$/.exec(updateId);
  if (proposal) return { decision: proposal[1] };
  const m = /^([a-z-]+)(?::([a-z_]+))?:parked-.+:after-\d+$/.exec(updateId);
  return m ? { decision: m[1], ...(m[2] ? { step: m[2] } : {}) } : undefined;
}
