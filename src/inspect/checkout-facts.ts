// What the world says about one checkout, read where its effects land: the cart, the charge's send record,
// its PaymentIntents and their refunds, the receipt and its correction (outbox, mailbox), the audit trail.
import { checkoutOperationId, compensationKey, stepKey } from '../contract';
import type { EvidenceSources } from './facts';
import { type Gathered, mailAndAuditFacts, readSource, sendFact } from './saga-facts';

export async function checkoutFacts(sources: EvidenceSources, cartId: string): Promise<Gathered> {
  const { store, stripe } = sources;
  const op = checkoutOperationId(cartId);
  const [chargeKey, receiptKey] = [stepKey(op, 'charge_card'), stepKey(op, 'send_receipt')];
  const [cart, send] = await Promise.all([store.checkouts.cart(cartId), store.sends.get(chargeKey, op)]);
  const stock = cart && `reserved by ${cart.reservedByKey ?? 'nobody'}, released by ${cart.releasedByKey ?? 'nobody'}`;
  const says = cart ? `${cart.amount} ${cart.currency}; stock ${stock}` : 'no such cart';
  const found: Gathered = { facts: [{ id: `store:cart:${cartId}`, says }, sendFact(send, 'charge')], unavailable: [] };
  await readSource(found, 'stripe', async () => {
    const intents = await stripe.paymentIntents.search({ query: `metadata['key']:'${chargeKey}'` });
    if (!intents.data.length)
      found.facts.push({ id: 'stripe:search', says: `no PaymentIntent carries key ${chargeKey}` });
    for (const pi of intents.data) {
      const refunds = await stripe.refunds.list({ payment_intent: pi.id, limit: 100 });
      const refunded = refunds.data.map((r) => `${r.id} ${r.amount} ${r.status}`).join(', ') || 'none';
      const standing = `${pi.status}, ${pi.amount} ${pi.currency}; refunds: ${refunded}`;
      found.facts.push({ id: `stripe:${pi.id}`, says: standing });
    }
  });
  await mailAndAuditFacts(sources, [receiptKey, compensationKey(receiptKey)], op, found);
  return found;
}
