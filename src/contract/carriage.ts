// A store write carried in an earlier send's receipt transaction: one commit and one task fewer. The step that may
// be carried declares it (`carriedBy`); the harness asks the send's activity to carry it, and takes what comes back
// as that step's result, which must have been written with the input the saga gives the step. A read may likewise
// ride in an earlier send's activity (FirstRead). Workflow code imports this: pure.
import { stepKey } from './ids';
import type { RefundReceipt } from './receipts';

/** What a send's activity carried, by the carried step's name: the input it wrote with, and its evidenced result. */
export type Carried = Record<string, { input: unknown; output: unknown }>;

/** What a send's activity is asked to carry, when its receipt lets the saga go on: the carried steps' names. */
export interface Carry {
  carry?: readonly string[];
}

/**
 * A read a send's activity is asked to make once its effect is recorded (the read step's `firstReadIn`): one task
 * fewer. What it read comes back by the step's name; a read that failed or was not made runs as its own task.
 */
export interface FirstRead {
  /** The read step, its input as the saga gives it, and how long its attempt may take (the run's pinned policy). */
  read?: { step: string; input: unknown; startToCloseMs: number };
}

/** What the send's activity read with the input it was asked for: the evidenced result, or a failed look's ledger. */
export type Read = Record<string, { output?: unknown; failed?: unknown[] }>;

/** A receipt against what was asked: failed, less (or another currency), more, or just what was asked. */
export function receiptAgainstAsk(
  receipt: Pick<RefundReceipt, 'status' | 'amount' | 'currency'>,
  asked: { amount: number; currency: string },
): 'failed' | 'partial' | 'more' | 'fits' {
  if (receipt.status === 'failed' || receipt.status === 'canceled') return 'failed';
  if (receipt.currency !== asked.currency || receipt.amount < asked.amount) return 'partial';
  return receipt.amount > asked.amount ? 'more' : 'fits';
}

/** The order update for a refund of an operation: what was really refunded, under the update step's key. */
export const orderUpdateOf = (
  orderId: string,
  operationId: string,
  { refundId, amount }: Pick<RefundReceipt, 'refundId' | 'amount'>,
) => ({ key: stepKey(operationId, 'update_order'), orderId, operationId, refundId, amount });
