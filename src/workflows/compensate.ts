// One registered compensation, run under its own key: the one way the refund run (its saga's end,
// a person's compensate decision, a cancellation) and the follow-up undo a step that the
// compensation plan (src/compensations/plan.ts) found standing in the store.
import type { RefundActivities } from '../activities';
import { REFUND_SAGA, type CompensationActivity, type RefundStep, type SagaContext } from '../compensations/registry';
import { evidenced, notificationReceiptSchema, orderReceiptSchema } from '../contract';
import { tally, type StepEvidence } from '../reliability/attempt-ledger';
import {
  compensationFailure,
  describeFailure,
  stepError,
  StepFailedError,
  type StepError,
} from '../saga/workflow/step-failure';

export interface CompensationOutcome {
  status: 'completed' | 'failed' | 'unknown';
  output?: unknown;
  error?: StepError;
  attempts: number;
  transportRequests: number;
}

/** The receipt each compensation's activity returns. */
const RECEIPT: Record<CompensationActivity, typeof orderReceiptSchema | typeof notificationReceiptSchema> = {
  revertRefund: orderReceiptSchema,
  sendRefundCorrection: notificationReceiptSchema,
};

/** A person's approval to resend a correction whose outcome was unknown (same Message-ID), naming the hand-over they judged. */
export interface ApprovedResend {
  resendApprovedAt: string;
  /** That hand-over's stamp (the store's clock), from the failure they saw: only it is resent. */
  approvedHandOver?: string;
}

/**
 * Runs `step`'s compensation under `key` with `activities` (built on call: a run whose budget cannot
 * schedule it records a failure), with a person's approved resend when there is one.
 */
export async function runCompensation(
  step: RefundStep,
  key: string,
  ctx: SagaContext,
  activities: () => RefundActivities,
  resend?: ApprovedResend,
): Promise<CompensationOutcome> {
  const { undo } = REFUND_SAGA[step];
  if (undo.kind !== 'compensation') throw new Error(`step ${step} has no compensation`);
  let raw: unknown;
  try {
    const acts = activities() as unknown as Record<CompensationActivity, (input: unknown) => Promise<unknown>>;
    raw = await acts[undo.activity]({ ...undo.input(ctx, key), ...resend });
  } catch (err) {
    // It could not even be scheduled (the run's deadline has passed): a person must finish it.
    if (err instanceof StepFailedError)
      return { status: 'failed', error: err.error, attempts: 0, transportRequests: 0 };
    const { error, ledger } = describeFailure(err, undo.boundary, `${step} compensation`, undo.boundary !== 'store');
    return { status: compensationFailure(error), error, ...tally({ attempt: ledger.length, ledger }) };
  }
  const parsed = evidenced(RECEIPT[undo.activity]).safeParse(raw);
  // It finished, so whatever it did happened; what it returned cannot be used as its receipt.
  if (!parsed.success) {
    return {
      status: 'unknown',
      error: stepError(
        'POISON',
        'undeterminable',
        'result_unusable',
        `${step}'s compensation returned a result that is not its receipt`,
      ),
      attempts: 0,
      transportRequests: 0,
    };
  }
  const { evidence, ...output } = parsed.data as Record<string, unknown> & { evidence: StepEvidence };
  return { status: 'completed', output, ...tally(evidence) };
}
