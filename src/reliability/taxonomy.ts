// The failure taxonomy: every failure an activity raises is an ApplicationFailure whose `type`
// is one of these codes and whose details say how certain we are about the effect. Workflow
// code imports this module, so it stays pure.
import { z } from 'zod';

export const FAILURE_CODES = [
  'RATE_LIMIT',
  'TRANSIENT_DEPENDENCY',
  'INVALID_ARGUMENTS',
  'PERMISSION_DENIED',
  'PERMANENT_BUSINESS',
  'STATE_CONFLICT',
  'UNKNOWN_OUTCOME',
  'PARTIAL_OUTCOME',
  'CAPACITY',
  'BUDGET_EXCEEDED',
  'POISON',
] as const;
export type FailureCode = (typeof FAILURE_CODES)[number];

/** What the failure tells us about the effect the call was meant to have. */
export const CERTAINTIES = ['not_executed', 'may_have_executed', 'partial', 'completed', 'undeterminable'] as const;
export type Certainty = (typeof CERTAINTIES)[number];

/** A failed step's effect nobody knows: it may have happened, or what came back cannot tell. */
export const outcomeUnknown = (certainty: string | null | undefined): boolean =>
  certainty === 'may_have_executed' || certainty === 'undeterminable';

/** The failure domain each code belongs to, as the design brief names them. */
export const DOMAIN_OF: Record<FailureCode, string> = {
  RATE_LIMIT: 'transient dependency',
  TRANSIENT_DEPENDENCY: 'transient dependency',
  INVALID_ARGUMENTS: 'schema / validation',
  PERMISSION_DENIED: 'permission / policy',
  PERMANENT_BUSINESS: 'permanent business',
  STATE_CONFLICT: 'state conflict',
  UNKNOWN_OUTCOME: 'unknown outcome',
  PARTIAL_OUTCOME: 'partial outcome',
  CAPACITY: 'capacity / overload',
  BUDGET_EXCEEDED: 'budget exhaustion',
  POISON: 'poison',
};

/** The dependency an activity talks to: the boundary whose retry policy owns its retries. */
export const BOUNDARIES = ['stripe', 'smtp', 'store'] as const;
export type Boundary = (typeof BOUNDARIES)[number];

/** Details every failure carries (the first entry of ApplicationFailure.details). */
export interface FailureDetails {
  code: FailureCode;
  domain: string;
  certainty: Certainty;
  boundary: Boundary;
  /** A short machine-readable cause within the code, e.g. "amount_too_large" or "version_conflict". */
  reason: string;
  operationId: string | null;
  /** The Temporal attempt that raised it. */
  attempt: number;
  /** What the provider asked us to wait, in ms, when it said so. */
  retryAfterMs: number | null;
  /** The delay this attempt asked Temporal to wait before the next (Retry-After or the policy's backoff with jitter). */
  nextDelayMs: number | null;
  providerRequestId: string | null;
  /** Anything else the dependency told us (Stripe error code, SMTP reply, refund id …). */
  provider: Record<string, string | number | boolean | null>;
}

const failureDetailsSchema = z.object({
  code: z.enum(FAILURE_CODES),
  certainty: z.enum(CERTAINTIES),
  reason: z.string(),
});

/** Reads our details from a failure's details array; undefined when the failure is not one of ours. */
export function readFailureDetails(details: readonly unknown[] | undefined | null): FailureDetails | undefined {
  const [first] = details ?? [];
  return failureDetailsSchema.safeParse(first).success ? (first as FailureDetails) : undefined;
}
