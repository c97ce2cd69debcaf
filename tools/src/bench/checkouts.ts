// The checkout saga under the bench's faults: carts checked out on the project's worker, some with a card that
// declines and some started twice, while the same schedule of faults fires at the charge's creates and the mail
// server and the worker is killed halfway; then the chaos run's checkout invariants, checked where the effects land
// (the Stripe server's ledger, the mailbox, the stock, each run's own state).
import type { WorkflowHandle } from '@temporalio/client';
import { setMaxListeners } from 'node:events';
import { outcomeOf } from '../../../src/client/outcome';
import type { RefundWorkflow } from '../../../src/contract';
import type { ChaosStack } from '../chaos/chaos-stack';
import { checkCheckouts, startCheckout, type CheckoutRecord } from '../chaos/checkouts';
import { summarizeOutcome, type Invariant } from '../chaos/invariant';
import { armFaults, disarmFaults, driveKilledHalfway, type BenchStackWorkers, type CellResult } from './matrix';

export interface CheckoutCell {
  concurrency: number;
  checkouts: number;
  /** How the checkouts ended: completed, compensated, rejected, parked (status), not settled, lost. */
  outcomes: Record<string, number>;
  invariants: Invariant[];
  injected: CellResult['injected'];
  durationMs: number;
}

/** One checkout in seven with a card that declines, one in ten started twice at once. */
const declines = (i: number) => i % 7 === 3;
const twice = (i: number) => i % 10 === 5;

/** `count` checkouts at `concurrency` on the project's worker, faults armed, the worker killed halfway. */
export async function runCheckoutCell(
  stack: ChaosStack,
  workers: BenchStackWorkers,
  concurrency: number,
  count: number,
  timeoutMs: number,
): Promise<CheckoutCell> {
  const worker = workers.workers.project!;
  await armFaults(stack, count, '/v1/payment_intents');
  const started = Date.now();
  const give = AbortSignal.timeout(timeoutMs);
  setMaxListeners(count + 10, give);
  const records: CheckoutRecord[] = [];
  const each = async (i: number) => {
    const cartId = `bench-checkout-c${concurrency}-${i}`;
    try {
      const { record, handle } = await startCheckout(stack, cartId, declines(i), twice(i));
      records.push(record);
      const outcome = await outcomeOf(handle as WorkflowHandle<RefundWorkflow>, 2000, give).catch((err: unknown) =>
        give.aborted ? null : (err as Error),
      );
      record.outcome = summarizeOutcome(outcome);
    } catch (err) {
      const reason = `not started: ${(err as Error).message}`;
      records.push({ cartId, email: '', paymentMethod: '', outcome: { kind: 'error', status: 'error', reason } });
    }
  };
  const { killed } = await driveKilledHalfway(count, concurrency, each, worker);
  const durationMs = Date.now() - started;
  const workerKills = await killed;
  const fired = await disarmFaults(stack);
  const outcomes: Record<string, number> = {};
  for (const { outcome: o } of records) {
    const how = !o ? 'not settled' : o.kind === 'parked' ? `parked (${o.status})` : o.status;
    outcomes[how] = (outcomes[how] ?? 0) + 1;
  }
  const invariants = await checkCheckouts(stack, records);
  return {
    concurrency,
    checkouts: records.length,
    outcomes,
    invariants,
    injected: { ...fired, workerKills },
    durationMs,
  };
}
