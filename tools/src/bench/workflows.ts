// The two workflows the benchmark measures ours against, with the same shape (refund, order
// update, notification) and none of the safety: no operation identity, no idempotency keys, no
// ledger, no policy, no reconciliation. Bundled apart from the refund workflows.
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { BareActivities, BareRefundInput } from './activities';

/** The same timeouts the bench gives the refund workers (BENCH_POLICY): a fair race. */
const STRIPE = { startToCloseTimeout: '5s', scheduleToCloseTimeout: '60s' } as const;
const STORE = { startToCloseTimeout: '5s', scheduleToCloseTimeout: '30s' } as const;
const SMTP = { startToCloseTimeout: '10s', scheduleToCloseTimeout: '60s' } as const;

export interface BareRefundResult {
  refundId: string;
  attempts: number;
}

/** (a) Bare Temporal: three activities in a row, each retried by Temporal's default retry policy. */
export async function bareRefundWorkflow(input: BareRefundInput): Promise<BareRefundResult> {
  const { refund } = proxyActivities<BareActivities>(STRIPE);
  const { updateOrder } = proxyActivities<BareActivities>(STORE);
  const { notify } = proxyActivities<BareActivities>(SMTP);
  const refundId = await refund(input);
  await updateOrder(input, refundId);
  await notify(input, refundId);
  return { refundId, attempts: 1 };
}

/** Whole-run attempts the naive design makes before it gives up. */
export const NAIVE_RUN_ATTEMPTS = 5;

/**
 * (c) Naive: any failure starts the whole run again from the first step, activities tried once
 * each, no keys: the design the project's first article starts from.
 */
export async function naiveRefundWorkflow(input: BareRefundInput): Promise<BareRefundResult> {
  const once = { retry: { maximumAttempts: 1 } };
  const { refund } = proxyActivities<BareActivities>({ ...STRIPE, ...once });
  const { updateOrder } = proxyActivities<BareActivities>({ ...STORE, ...once });
  const { notify } = proxyActivities<BareActivities>({ ...SMTP, ...once });
  for (let attempt = 1; ; attempt++) {
    try {
      const refundId = await refund(input);
      await updateOrder(input, refundId);
      await notify(input, refundId);
      return { refundId, attempts: attempt };
    } catch (err) {
      if (attempt >= NAIVE_RUN_ATTEMPTS) throw err;
      await sleep(1000 * 2 ** (attempt - 1));
    }
  }
}
