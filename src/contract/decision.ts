// A person's (or the sweep's) decision for a parked run: what the `decide` Update takes, and the
// record the run keeps of each decision. The run's DecisionDesk judges them (src/workflows/).
import { z } from 'zod';
import { DECISION_KINDS, deciderNameSchema } from '../reliability/policy-terms';
import { signedSchema } from './decision-signature';
import { SAGA_STEPS, type SagaStep } from './steps';

export const decisionInputSchema = z
  .object({
    decision: z.enum(DECISION_KINDS),
    by: deciderNameSchema,
    reason: z.string().trim().min(1, 'must say why').max(500),
    /** For retry-step: the step (the one that failed, which is also the default). */
    step: z.enum(SAGA_STEPS).optional(),
    /** The parking the decider read (decisionAddress), for an unsigned decision; a signed one says it in `signed`. Refused when the run is elsewhere. */
    answers: z.string().min(1).max(200).optional(),
    /** The decider's signature and what it is addressed to; only `reconcile` may go without (decision-signature.ts). */
    signed: signedSchema.optional(),
  })
  .strict();
export type DecisionInput = z.input<typeof decisionInputSchema>;
export type ParsedDecision = z.output<typeof decisionInputSchema>;

export interface DecisionRecord extends Pick<ParsedDecision, 'decision' | 'by' | 'reason'> {
  /** 1, 2, …: the order decisions were taken in. */
  seq: number;
  step: SagaStep | null;
  at: string;
  /** applied; waiting for approval; or, for a proposal, what became of it. */
  outcome: 'applied' | 'awaiting_approval' | 'approved' | 'rejected' | 'expired';
  /** For a proposal waiting for approval: when it expires into a stop. */
  expiresAt: string | null;
  /** For approve/reject: the proposal it answers. */
  answers: number | null;
  /** The key that signed it (keyIdOf), or null for an unsigned decision (reconcile, or DECISIONS_UNSIGNED=allow). Absent in records kept before signed decisions. */
  keyId?: string | null;
  /** The signature's nonce: a signed decision is taken once. */
  nonce?: string | null;
}

/** The scheduled sweep's name as a decider. */
export const SWEEPER = 'sweep';

/**
 * The command that sends a parked run its decision (`retry-step:<step>` is sent as retry-step: the run
 * retries the step it parked at), as `inspect` prints it and the run's page in the Web UI shows it: for
 * the parking read there (`address`, decisionAddress), so that decide refuses it once the run has moved.
 */
export function decideCommand(workflowId: string, decision: string, address?: string | null): string {
  const answers = address ? ` --answers ${address}` : '';
  return `npm run decide -- ${workflowId} ${decision.split(':')[0]}${answers} --by <name> --reason "<why>"`;
}
