// The checkout saga's share of a chaos run: a cart checked out (some with a card that declines, some
// started twice), and its invariants checked where its effects land: the Stripe server's ledger (one
// charge at most, one refund of it at most), the mailbox (one receipt, one correction at most), the
// stock (taken once, put back once), and the run's own state (every compensation completed, every
// parked run with a verdict). A compensated checkout corrected every receipt the mailbox holds.
import type { WorkflowHandle } from '@temporalio/client';
import {
  checkoutOperationId,
  checkoutStateQuery,
  checkoutWorkflowId,
  messageIdForKey,
  stepKey,
  TASK_QUEUE,
  type RefundWorkflow,
} from '../../../src/contract';
import { seedCart, setStock, stockLeft } from '../shop/carts';
import { getJson, type ChaosStack } from './chaos-stack';
import { fail, invariant as inv, type RunOutcomeSummary } from './invariant';

const STOCK = 5;
const QUANTITY = 2;

export interface CheckoutRecord {
  cartId: string;
  email: string;
  paymentMethod: string;
  outcome: RunOutcomeSummary | null;
}

/** Puts a cart in the store and starts its checkout (twice at once when `twice`); the handle to settle. */
export async function startCheckout(
  stack: ChaosStack,
  cartId: string,
  declines: boolean,
  twice: boolean,
): Promise<{ record: CheckoutRecord; handle: WorkflowHandle<RefundWorkflow> }> {
  const email = `${cartId}@example.test`;
  const sku = `${cartId}-item`;
  await setStock(stack.store, sku, STOCK);
  await seedCart(stack.store, {
    id: cartId,
    customerEmail: email,
    currency: 'usd',
    amount: 3000,
    items: [{ sku, quantity: QUANTITY }],
  });
  const paymentMethod = declines ? 'pm_card_chargeDeclined' : 'pm_card_visa';
  const start = () =>
    stack.client.workflow.start('checkoutWorkflow', {
      taskQueue: TASK_QUEUE,
      workflowId: checkoutWorkflowId(cartId),
      args: [{ cartId, paymentMethod, requestedBy: 'chaos' }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
  const [handle] = await Promise.all(twice ? [start(), start()] : [start()]);
  return {
    record: { cartId, email, paymentMethod, outcome: null },
    handle: handle as unknown as WorkflowHandle<RefundWorkflow>,
  };
}

export async function checkCheckouts(stack: ChaosStack, records: CheckoutRecord[]) {
  const charges = inv('checkout: zero duplicate charges or refunds of a charge (Stripe ledger)');
  const emails = inv('checkout: zero duplicate receipts or corrections (SMTP mailbox)');
  const stock = inv('checkout: stock taken once and put back once (store)');
  const undone = inv('checkout: every compensation with its receipt, every stopped run with a verdict');
  for (const r of records) {
    const op = checkoutOperationId(r.cartId);
    const key = stepKey(op, 'charge_card');
    const pis = await stack.stripe.paymentIntents.search({ query: `metadata['key']:'${key}'` });
    const effects = (
      await Promise.all(
        pis.data.map((pi) =>
          getJson<{ effects: { type: string }[] }>(`${stack.stripeUrl}/_ledger?payment_intent=${pi.id}`),
        ),
      )
    ).flatMap((l) => l.effects);
    const charged = effects.filter((e) => e.type === 'charge.succeeded').length;
    const refunded = effects.filter((e) => e.type === 'refund.created').length;
    charges.checked += 1;
    if (charged > 1 || refunded > 1) fail(charges, `${r.cartId}: ${charged} charges, ${refunded} refunds`);

    const { messages } = await getJson<{ messages: { messageId: string }[] }>(
      `${stack.mail.apiUrl}/messages?to=${encodeURIComponent(r.email)}`,
    );
    const receipts = messages.filter((m) => m.messageId === messageIdForKey(stepKey(op, 'send_receipt'))).length;
    const corrections = messages.length - receipts;
    emails.checked += 1;
    if (receipts > 1 || corrections > 1) fail(emails, `${r.cartId}: ${receipts} receipts, ${corrections} corrections`);

    const cart = await stack.store.checkouts.cart(r.cartId);
    const left = await stockLeft(stack.store, `${r.cartId}-item`);
    const held = cart?.reservedByKey && !cart.releasedByKey ? QUANTITY : 0;
    stock.checked += 1;
    if (left !== STOCK - held) fail(stock, `${r.cartId}: ${left} left of ${STOCK}, ${held} held by its reservation`);

    undone.checked += 1;
    const o = r.outcome;
    if (!o || o.kind === 'error') {
      fail(undone, `${r.cartId}: ${o ? o.reason : 'not settled'}`);
      continue;
    }
    if (o.kind === 'parked' && !o.verdict) fail(undone, `${r.cartId}: parked without a verdict`);
    const problems: string[] = [];
    if (o.status === 'completed' && (charged !== 1 || refunded !== 0 || receipts !== 1 || held !== QUANTITY))
      problems.push(`completed with ${charged} charges, ${refunded} refunds, ${receipts} receipts, ${held} held`);
    if (o.status === 'compensated') {
      const state = await stack.client.workflow
        .getHandle(checkoutWorkflowId(r.cartId))
        .query(checkoutStateQuery)
        .catch(() => null);
      const open = state?.steps
        .filter((s) => s.compensation && s.compensation.status !== 'completed')
        .map((s) => s.name);
      if (open?.length) problems.push(`compensated with ${open.join(', ')} not undone`);
      if (held || refunded !== charged || corrections < receipts)
        problems.push(
          `compensated with ${held} held, ${charged} charges and ${refunded} refunds, ${receipts} receipts and ${corrections} corrections`,
        );
    }
    if ((o.status === 'rejected' || r.paymentMethod === 'pm_card_chargeDeclined') && charged !== 0)
      problems.push(`${o.status} with ${charged} charges`);
    problems.forEach((p) => fail(undone, `${r.cartId}: ${p}`));
  }
  return [charges, emails, stock, undone];
}
