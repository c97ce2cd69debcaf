// What a recovery policy must be, checked where a policy is loaded: the shipped default when a
// worker starts, a POLICY_FILE, the CLIs. Workflow code never imports this module (its zod schemas
// would be built again in every run); it gets policies already checked, and policy.ts decides with them.
import { z } from 'zod';
import {
  ACTIONS,
  DEFAULT_AWAIT_PROVIDER,
  DEFAULT_BREAKER,
  deciderNameSchema,
  findRule,
  OWNER_OF,
  OWNERS,
  publicKeySchema,
  ROLES,
} from './policy-terms';
import { BOUNDARIES, CERTAINTIES, FAILURE_CODES } from './taxonomy';
import { parseInput } from '../domain/zod-problems';

const WEEK_MS = 7 * 24 * 3600_000;
const ms = z.number().int().min(0).max(WEEK_MS);

const backoffSchema = z
  .object({ initialMs: ms.min(1), coefficient: z.number().min(1).max(10), maxMs: ms.min(1) })
  .strict()
  .refine((b) => b.maxMs >= b.initialMs, { message: 'maxMs must be at least initialMs' });

const ruleSchema = z
  .object({
    code: z.enum(FAILURE_CODES),
    certainty: z.union([z.enum(CERTAINTIES), z.literal('*')]).default('*'),
    boundary: z.union([z.enum(BOUNDARIES), z.literal('*')]).default('*'),
    action: z.enum(ACTIONS),
    owner: z.enum(OWNERS),
    /** Attempts of the call for retry/repair; lookups for reconcile; 1 otherwise. */
    maxAttempts: z.number().int().min(1).max(100).default(1),
    backoff: backoffSchema.optional(),
    /** ± this fraction of each delay, so that clients that failed together do not come back together. */
    jitter: z.number().min(0).max(1).default(0),
    note: z.string().max(300).optional(),
  })
  .strict()
  .superRefine((rule, ctx) => {
    if (!OWNER_OF[rule.action].includes(rule.owner))
      ctx.addIssue({
        code: 'custom',
        path: ['owner'],
        message: `${rule.action} is owned by ${OWNER_OF[rule.action].join(' or ')}, not ${rule.owner}`,
      });
    if (['retry', 'repair', 'reconcile'].includes(rule.action) && !rule.backoff)
      ctx.addIssue({ code: 'custom', path: ['backoff'], message: `a ${rule.action} rule needs a backoff` });
  });

const timeoutsSchema = z
  .object({
    /** One attempt; must outlast the client's own request timeout. */
    startToCloseMs: ms.min(1000),
    /** All attempts together, before the run's remaining deadline caps it further. */
    scheduleToCloseMs: ms.min(1000),
  })
  .strict()
  .refine((t) => t.scheduleToCloseMs >= t.startToCloseMs, {
    message: 'scheduleToCloseMs must be at least startToCloseMs',
  });

const budgetSchema = z
  .object({
    /** From the run's start; nothing is started that could not finish before it. */
    deadlineMs: ms.min(10_000),
    /** Attempts of any one step (a cap on every rule's maxAttempts). */
    maxStepAttempts: z.number().int().min(1).max(100),
    /** Time the run may spend retrying, reconciling and polling, summed over its steps. */
    retryTimeMs: ms.min(1000),
    /** Requests to the providers (Stripe, SMTP) the run may send in all. */
    providerCalls: z.number().int().min(1).max(1000),
  })
  .strict();

/** A decision that needs a second person: `compensate`, `abandon`, `confirm-delivered`, or `retry-step:<step>`. */
const approvalSchema = z
  .string()
  .regex(
    /^(compensate|abandon|confirm-delivered|retry-step:[a-z_]+)$/,
    'must be compensate, abandon, confirm-delivered or retry-step:<step>',
  );

export const decisionsSchema = z
  .object({
    /** Who may decide, by name: an operator proposes (retry-step, compensate, abandon, confirm-delivered), an approver approves or rejects. */
    roles: z.record(deciderNameSchema, z.array(z.enum(ROLES)).min(1)),
    /** Each decider's Ed25519 public key: a decision is taken only when signed with it (docs/production.md, "Signed decisions"). */
    keys: z.record(deciderNameSchema, publicKeySchema).default({}),
    needApproval: z.array(approvalSchema),
    /** A decision not approved in this time expires, and the run stops: never proceeds. */
    approvalTtlMs: ms.min(1000),
  })
  .strict();
export type DecisionPolicy = z.output<typeof decisionsSchema> & {
  /**
   * DECISIONS_UNSIGNED=allow, for local development only: an unsigned decision is taken on its name
   * alone. Never read from a policy file (the schema refuses it there): a worker's setting, said at its start.
   */
  unsigned?: 'allow';
};

const MAX_POLLS = 200;

/**
 * How long a refund the provider accepted but has not settled (pending) is waited for: the run
 * waits for the provider's webhook, polls with this backoff in case none comes, and parks for a
 * person once the deadline passes. The waiting is outside the run's budgets; the polls are reads.
 */
const awaitProviderSchema = z
  .object({
    /** From the first time the refund was seen pending. */
    deadlineMs: ms.min(1000),
    /** Between polls while no webhook has settled it. */
    poll: backoffSchema.refine((b) => b.initialMs >= 1000, {
      message: 'initialMs must be at least 1000: polls are reads of the provider',
    }),
    jitter: z.number().min(0).max(1).default(0.2),
  })
  .strict()
  // Every poll is in the run's history: a wait that could need thousands of them is refused.
  .refine((a) => a.deadlineMs <= MAX_POLLS * a.poll.maxMs, {
    message: `deadlineMs may be at most ${MAX_POLLS} × poll.maxMs`,
  });

/**
 * The circuit breaker in front of each provider's side-effecting calls (see circuit-breaker.ts):
 * this many health failures within windowMs, at least half of its calls in that window (those still
 * out included), open it; after cooldownMs it lets halfOpenProbes calls through, and their success
 * closes it.
 */
const breakerSchema = z
  .object({
    enabled: z.boolean().default(true),
    failureThreshold: z.number().int().min(1).max(1000),
    windowMs: ms.min(1000),
    cooldownMs: ms.min(100),
    halfOpenProbes: z.number().int().min(1).max(100),
  })
  .strict();
export type BreakerSettings = z.output<typeof breakerSchema>;

const policySchema = z
  .object({
    version: z.string().min(1).max(64),
    rules: z.array(ruleSchema).min(1),
    timeouts: z.object({ stripe: timeoutsSchema, smtp: timeoutsSchema, store: timeoutsSchema }).strict(),
    budget: budgetSchema,
    decisions: decisionsSchema,
    awaitProvider: awaitProviderSchema.default(DEFAULT_AWAIT_PROVIDER),
    breaker: breakerSchema.default(DEFAULT_BREAKER),
  })
  .strict()
  .superRefine((policy, ctx) => {
    const seen = new Set<string>();
    policy.rules.forEach((r, i) => {
      const id = `${r.code}/${r.certainty}/${r.boundary}`;
      if (seen.has(id)) ctx.addIssue({ code: 'custom', path: ['rules', i], message: `a second rule for ${id}` });
      seen.add(id);
    });
    // The first combination no rule decides: the search stops there.
    const undecided = FAILURE_CODES.flatMap((code) =>
      CERTAINTIES.flatMap((certainty) => BOUNDARIES.map((boundary) => ({ code, certainty, boundary }))),
    ).find(({ code, certainty, boundary }) => !findRule(policy.rules, code, certainty, boundary));
    if (undecided) {
      const { code, certainty, boundary } = undecided;
      ctx.addIssue({
        code: 'custom',
        path: ['rules'],
        message: `no rule decides ${code} / ${certainty} at ${boundary}`,
      });
    }
  });

export type RecoveryRule = z.output<typeof ruleSchema>;
/** A checked policy; a worker may add its own settings to the decisions (DecisionPolicy's `unsigned`). */
export type RecoveryPolicy = Omit<z.output<typeof policySchema>, 'decisions'> & { decisions: DecisionPolicy };
export type BudgetLimits = z.output<typeof budgetSchema>;

/** Validates a policy, throwing one error that names every problem. */
export const parsePolicy = (input: unknown, source = 'recovery policy'): RecoveryPolicy =>
  parseInput(policySchema, input, source, '(policy)', Error);
