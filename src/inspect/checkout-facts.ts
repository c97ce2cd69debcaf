// What the world says about one checkout, read where its effects land: the cart, the charge's send record,
// its PaymentIntents and their refunds, the receipt and its correction (outbox, mailbox), the audit trail.
import { checkoutOperationId, compensationKey, stepKey } from '../contract';
import { countMessages, outboxFact, short, type EvidenceSources, type Fact } from './facts';

export async function checkoutFacts({ store, stripe, mailboxUrl }: EvidenceSources, cartId: string) {
  const op = checkoutOperationId(cartId);
  const [chargeKey, receiptKey] = [stepKey(op, 'charge_card'), stepKey(op, 'send_receipt')];
  const [cart, send] = await Promise.all([store.checkouts.cart(cartId), store.sends.get(chargeKey, op)]);
  const stock =
    cart && `stock reserved by ${cart.reservedByKey ?? 'nobody'}, released by ${cart.releasedByKey ?? 'nobody'}`;
  const receipt = send.receipt ? `receipt ${JSON.stringify(send.receipt)}` : 'no receipt';
  const facts: Fact[] = [
    { id: `store:cart:${cartId}`, says: cart ? `${cart.amount} ${cart.currency}; ${stock}` : 'no such cart' },
    {
      id: `store:send:${chargeKey}`,
      says: `${send.requestsSent} charge request(s) sent; absence proven through ${send.provenAbsentThrough ?? 'none'}; ${receipt}`,
    },
  ];
  const unavailable: string[] = [];
  try {
    const found = await stripe.paymentIntents.search({ query: `metadata['key']:'${chargeKey}'` });
    if (!found.data.length) facts.push({ id: 'stripe:search', says: `no PaymentIntent carries key ${chargeKey}` });
    for (const pi of found.data) {
      const refunds = await stripe.refunds.list({ payment_intent: pi.id, limit: 100 });
      const refunded = refunds.data.map((r) => `${r.id} ${r.amount} ${r.status}`).join(', ') || 'none';
      facts.push({ id: `stripe:${pi.id}`, says: `${pi.status}, ${pi.amount} ${pi.currency}; refunds: ${refunded}` });
    }
  } catch (err) {
    unavailable.push(`stripe: ${short(err)}`);
  }
  for (const key of [receiptKey, compensationKey(receiptKey)]) {
    const entry = await store.getNotification(key);
    if (!entry) continue;
    facts.push(outboxFact(entry));
    if (mailboxUrl)
      await countMessages(facts, mailboxUrl, entry.messageId).catch((err) =>
        unavailable.push(`mailbox: ${short(err)}`),
      );
  }
  for (const a of await store.operations.auditTrail(op))
    facts.push({ id: `store:audit:${a.seq}`, says: `${a.at} ${a.actor}: ${a.event} ${JSON.stringify(a.detail)}` });
  return { facts, unavailable };
}
