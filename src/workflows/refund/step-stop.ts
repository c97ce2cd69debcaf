// A step that failed for good stops the run with the right verdict, as the recovery policy decides:
// before the point of no return a refusal the business expects is `rejected` (nothing happened);
// anything else needs a person, and says what is known of the effect.
import { REFUND_SAGA, type RefundStep } from '../../compensations/registry';
import { ruleFor, retries } from '../../reliability/policy';
import { StepFailedError, type StepError } from '../../saga/workflow/step-failure';
import type { RefundRun } from './run';
import { stepFailed } from './stop-reasons';
import { stop } from '../../saga/workflow/run-stopped';

/** Runs a step; a failure the policy cannot recover from here stops the run. */
export async function attempt<T>(run: RefundRun, step: RefundStep, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof StepFailedError)) throw err;
    stopForFailure(run, step, err.error);
  }
}

export function stopForFailure(run: RefundRun, step: RefundStep, error: StepError): never {
  const rule = ruleFor(run.policy, error.code, error.certainty, REFUND_SAGA[step].boundary);
  const reasons = stepFailed(step, error, retries(rule) ? run.steps.get(step).attempts : null);
  const quarantined = rule.action === 'quarantine';
  const { operationId } = run.ctx;
  if (REFUND_SAGA[step].onFailure === 'forward_repair')
    stop('needs_attention', reasons.refundStands(run.ctx.refund?.refundId), step, quarantined);
  if (error.certainty !== 'not_executed') {
    run.effect = { status: 'unknown', certainty: error.certainty, refundId: null };
    stop('needs_attention', reasons.effectUnknown(operationId), step, quarantined);
  }
  // This attempt had no effect; whether an earlier send did is the operation's record's to say, not this attempt's.
  const recorded = run.operation.recordedEffect();
  if (recorded?.status === 'unknown') {
    run.effect = { status: 'unknown', certainty: 'may_have_executed', refundId: run.effect.refundId };
    stop('needs_attention', reasons.earlierSendOpen(recorded.why, operationId), step, quarantined);
  }
  const refusal = error.code === 'PERMANENT_BUSINESS' || error.code === 'INVALID_ARGUMENTS';
  if (refusal && rule.action === 'stop') stop('rejected', reasons.refused(), step);
  stop('needs_attention', reasons.nothingRefunded(), step, quarantined);
}
