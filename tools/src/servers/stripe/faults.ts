// Faults the local Stripe server injects at exact boundaries of a request, armed through its
// admin API (POST /_faults) and scoped so that tests running side by side do not disturb each
// other. Each fault fires for the next `count` requests it matches, or on every `every`-th one.
import { z } from 'zod';
import { spacing, takeDue, unfired, type Spaced } from '../due-fault';
import type { ApiResponse } from './api';
import type { FormParams } from './form';

export const STRIPE_FAULT_KINDS = [
  /** The request dies before the effect is committed: the connection is cut, nothing happened. */
  'fail_before_commit',
  /** The effect and its stored response are committed, then the connection is cut: a lost response. */
  'drop_after_commit',
  /** The effect is committed and the answer held for delayMs (past the client's timeout), then sent. */
  'stall',
  /** 429 with Retry-After, before anything happens: at the edge, so a request whose key was used before gets it too. */
  'rate_limit',
  /** A 5xx answer (status), before anything happens and not stored against the key. */
  'server_error',
  /** The request waits delayMs, then runs normally. */
  'slow',
  /** A refund for less than asked (amount, default half) is committed, then the connection is cut. */
  'partial',
  /** The refund the request creates stays invisible to list requests for lagMs; retrieve by id still sees it. */
  'lagging_list',
] as const;
export type StripeFaultKind = (typeof STRIPE_FAULT_KINDS)[number];

export const stripeFaultSchema = z
  .object({
    kind: z.enum(STRIPE_FAULT_KINDS),
    match: z
      .object({
        method: z.enum(['GET', 'POST']).optional(),
        path: z.string().startsWith('/').optional(),
        idempotencyKey: z.string().min(1).optional(),
        idempotencyKeyPrefix: z.string().min(1).optional(),
        /** metadata[order_id] of the request. */
        orderId: z.string().min(1).optional(),
        /** payment_intent of the request (body or query). */
        paymentIntent: z.string().min(1).optional(),
      })
      .strict()
      .default({}),
    ...spacing,
    status: z.number().int().min(500).max(599).default(500),
    retryAfterSeconds: z.number().min(0).max(3600).default(1),
    delayMs: z.number().int().min(0).max(600_000).optional(),
    lagMs: z.number().int().min(1).max(600_000).default(5000),
    amount: z.number().int().min(1).optional(),
  })
  .strict();

export type StripeFaultInput = z.input<typeof stripeFaultSchema>;
export type StripeFaultSpec = z.output<typeof stripeFaultSchema>;

export interface ArmedFault extends StripeFaultSpec, Spaced {
  id: string;
}

export interface RequestFacts {
  method: string;
  path: string;
  idempotencyKey: string | null;
  params: FormParams;
}

/** What the server does instead of (or on top of) the normal handling, before the effect. */
export type BeforeEffect =
  | { kind: 'respond'; fault: ArmedFault; response: ApiResponse; headers?: Record<string, string> }
  | { kind: 'drop'; fault: ArmedFault }
  | { kind: 'delay'; fault: ArmedFault; ms: number }
  | { kind: 'params'; fault: ArmedFault; params: FormParams; drop: true };

/** What the server does after the effect was committed. */
export type AfterEffect = { kind: 'drop'; fault: ArmedFault } | { kind: 'delay'; fault: ArmedFault; ms: number };

const BEFORE: StripeFaultKind[] = ['fail_before_commit', 'server_error', 'slow', 'partial'];
const AFTER: StripeFaultKind[] = ['drop_after_commit', 'stall'];
const DEFAULT_STALL_MS = 30_000;

export function createStripeFaults() {
  const armed: ArmedFault[] = [];
  let next = 1;

  const matches = (f: ArmedFault, r: RequestFacts) => {
    const m = f.match;
    const metadata = r.params.metadata;
    const orderId = typeof metadata === 'object' && !Array.isArray(metadata) ? metadata.order_id : undefined;
    return (
      (m.method === undefined || m.method === r.method) &&
      (m.path === undefined || m.path === r.path) &&
      (m.idempotencyKey === undefined || m.idempotencyKey === r.idempotencyKey) &&
      (m.idempotencyKeyPrefix === undefined || (r.idempotencyKey?.startsWith(m.idempotencyKeyPrefix) ?? false)) &&
      (m.orderId === undefined || m.orderId === orderId) &&
      (m.paymentIntent === undefined || m.paymentIntent === r.params.payment_intent)
    );
  };

  /** The armed fault of these kinds whose turn it is on this request, consumed. */
  const take = (kinds: StripeFaultKind[], r: RequestFacts): ArmedFault | undefined =>
    takeDue(armed, (f) => kinds.includes(f.kind) && matches(f, r));

  return {
    arm(input: unknown): ArmedFault {
      const spec = stripeFaultSchema.parse(input);
      const fault: ArmedFault = { ...spec, id: `fault_${next++}`, ...unfired(spec.count) };
      armed.push(fault);
      return fault;
    },
    list(): ArmedFault[] {
      return armed.map((f) => ({ ...f }));
    },
    clear(id?: string): number {
      const before = armed.length;
      const keep = armed.filter((f) => id !== undefined && f.id !== id);
      armed.splice(0, armed.length, ...keep);
      return before - armed.length;
    },

    /** The rate limiter, in front of everything else (the replay of a used key included), as Stripe's is. */
    edge(r: RequestFacts): Extract<BeforeEffect, { kind: 'respond' }> | undefined {
      const fault = take(['rate_limit'], r);
      if (!fault) return undefined;
      return {
        kind: 'respond',
        fault,
        response: {
          status: 429,
          body: {
            error: {
              type: 'invalid_request_error',
              code: 'rate_limit',
              message: 'Too many requests hit the API too quickly.',
            },
          },
        },
        headers: { 'Retry-After': String(fault.retryAfterSeconds) },
      };
    },

    before(r: RequestFacts): BeforeEffect | undefined {
      const fault = take(BEFORE, r);
      if (!fault) return undefined;
      switch (fault.kind) {
        case 'fail_before_commit':
          return { kind: 'drop', fault };
        case 'server_error':
          return {
            kind: 'respond',
            fault,
            response: {
              status: fault.status,
              body: { error: { type: 'api_error', message: 'An unknown error occurred (injected)' } },
            },
          };
        case 'slow':
          return { kind: 'delay', fault, ms: fault.delayMs ?? 1000 };
        case 'partial': {
          const asked = Number(r.params.amount);
          const amount = fault.amount ?? Math.max(1, Math.floor((Number.isFinite(asked) ? asked : 2) / 2));
          return { kind: 'params', fault, params: { ...r.params, amount: String(amount) }, drop: true };
        }
        default:
          return undefined;
      }
    },

    after(r: RequestFacts): AfterEffect | undefined {
      const fault = take(AFTER, r);
      if (!fault) return undefined;
      if (fault.kind === 'drop_after_commit') return { kind: 'drop', fault };
      return { kind: 'delay', fault, ms: fault.delayMs ?? DEFAULT_STALL_MS };
    },

    /** How long the refund this request created stays out of list results (independent of how it is answered). */
    lag(r: RequestFacts): number | undefined {
      return take(['lagging_list'], r)?.lagMs;
    },
  };
}

export type StripeFaults = ReturnType<typeof createStripeFaults>;
