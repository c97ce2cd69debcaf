// Which decisions fit a parked refund's own state, beyond who may take them (the desk's): a retry
// only when nothing is left to compensate, a reconcile only of a refund nobody knows, a compensation
// only when the refund did not go through, a confirmation only of a notice whose outcome is unknown.
import type { ParsedDecision, RefundStep } from '../../contract';
import type { Parking } from '../../saga/workflow/desk';

/** What the rules read of the run. */
export interface RefundFacts {
  /** What is known of the refund: only an unknown one can be reconciled. */
  effect: () => string;
  /** Why compensating now would be wrong, or null when it is possible. */
  cannotCompensate: () => string | null;
  /** Whether the step failed with an outcome nobody knows (a notice handed over with no answer). */
  outcomeUnknown: (step: RefundStep) => boolean;
}

export function refundRefusals(run: RefundFacts) {
  return (d: ParsedDecision, parked: Parking<RefundStep>): string | null => {
    const at = parked.failedStep ?? 'no step';
    switch (d.decision) {
      case 'retry-step':
        // Retrying would only lead back to the compensations, without the approval they may need.
        return run.cannotCompensate() === null
          ? 'the refund did not go through and finished steps say it did: compensate, not retry-step'
          : null;
      case 'reconcile':
        return run.effect() !== 'unknown' || parked.failedStep !== 'create_refund'
          ? `nothing to reconcile: the refund is ${run.effect()}${parked.failedStep !== 'create_refund' ? ` and the run stopped at ${at}` : ''}`
          : null;
      case 'compensate': {
        const why = run.cannotCompensate();
        return why && `nothing to compensate: ${why}`;
      }
      case 'confirm-delivered': {
        // A person's word settles only what nobody knows: a notice the run knows was sent, or not, needs none.
        const why =
          parked.failedStep !== 'notify_customer'
            ? `the run stopped at ${at}`
            : !run.outcomeUnknown('notify_customer')
              ? 'its outcome is known'
              : null;
        return (
          why && `nothing to confirm: confirm-delivered settles notify_customer when its outcome is unknown; ${why}`
        );
      }
      default:
        return null;
    }
  };
}
