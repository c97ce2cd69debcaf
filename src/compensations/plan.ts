// What a refund that did not go through leaves to undo, decided from the store's records, never from which steps a
// run saw finish: the run, a compensate decision, a cancellation and the follow-up all ask here. Pure: workflow code.
import { compensationKey, stepKey, type StandingRecords } from '../contract';
import { resendsUnknownEmail, type RecoveryPolicy } from '../reliability/policy';
import { compensationOrder } from '../saga/order';
import { REFUND_SAGA, type RefundStep } from './registry';

/** A compensation's own key: derived from the key its forward step recorded, which is the step's key (stepKey). */
export function compensationKeyOf(step: RefundStep, operationId: string): string {
  if (REFUND_SAGA[step].undo.kind !== 'compensation')
    throw new Error(`step ${step} has no compensation, so no compensation key`);
  return compensationKey(stepKey(operationId, step));
}

/**
 * Whether a notice whose hand-over is unknown is corrected without asking: when the policy resends
 * such a notice anyway (it accepts that the customer may get a message twice), or a person decided
 * to compensate. Otherwise a correction could contradict an email the customer never got.
 */
export function correctsUnknownNotice(policy: RecoveryPolicy, decidedByPerson: boolean): boolean {
  return decidedByPerson || resendsUnknownEmail(policy);
}

/**
 * The plan: `undo`, what stands, in the order it is undone, each under its own key (one already done replays its
 * receipt): the refund on the order is taken off; a notice sent is corrected; a notice never handed over (pending)
 * told the customer nothing; one whose hand-over is unknown (sending) is corrected when `correctUnknown`, or else
 * `held` for a person, never skipped in silence. A correction already begun is never held: its key replays it.
 * `ifFound` says what a person does when the held notice is in the mailbox, as the caller can offer it (the run
 * takes a compensate decision; the follow-up takes none).
 */
export function compensationPlan(
  operationId: string,
  records: Pick<StandingRecords, 'order' | 'notice' | 'correction'>,
  correctUnknown: boolean,
  ifFound = 'compensate sends the correction',
) {
  const { notice } = records;
  const unknown = notice?.status === 'sending';
  const corrected = notice?.status === 'sent' || (unknown && (correctUnknown || !!records.correction));
  const stands: RefundStep[] = [];
  if (records.order) stands.push('update_order');
  if (corrected) stands.push('notify_customer');
  const planned = (step: RefundStep) => ({ step, key: compensationKeyOf(step, operationId) });
  const held =
    unknown && !corrected
      ? {
          ...planned('notify_customer'),
          reason:
            `the customer notice ${notice.messageId} may have reached them (its hand-over is unknown), so no correction was sent: ` +
            `look for it in the mailbox; if it is there, ${ifFound}; if not, the customer was told nothing`,
        }
      : null;
  return { undo: compensationOrder(stands, REFUND_SAGA).map(planned), held };
}
