// The workflows the benchmark measures ours against, with the same shape (refund, order update,
// notification) and none of the safety: no operation identity, no idempotency keys, no ledger, no
// policy, no reconciliation. Bundled apart from the refund workflows.
import { log, proxyActivities, setCurrentDetails, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import { SEARCH_ATTRIBUTES } from '../../../src/contract/search-attributes';
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

/**
 * (b) Bare with the platform features the project uses: the run's page says where it is at each step (current
 * details) and its status is upserted when it ends, as the refund workflow shows its moves; each step logged. Its
 * worker and client add the rest (payload encryption, the worker's log, start attributes and summary, polling).
 */
export async function platformRefundWorkflow(input: BareRefundInput): Promise<BareRefundResult> {
  const { refund } = proxyActivities<BareActivities>(STRIPE);
  const { updateOrder } = proxyActivities<BareActivities>(STORE);
  const { notify } = proxyActivities<BareActivities>(SMTP);
  const at = (step: string) => {
    setCurrentDetails(`**running** at ${step}\n\n**Refund:** ${step === 'refund' ? 'none' : 'refunded'}`);
    log.info('step', { step, orderId: input.orderId });
  };
  at('refund');
  const refundId = await refund(input);
  at('update_order');
  await updateOrder(input, refundId);
  at('notify');
  await notify(input, refundId);
  setCurrentDetails(`**completed**\n\n**Refund:** refunded (${refundId})`);
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.status, value: 'completed' }]);
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
