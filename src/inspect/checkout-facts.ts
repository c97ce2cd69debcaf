// What the world says about one checkout, read where its effects land: the cart and its stock
// reservation, the charge's send record and its PaymentIntents at the provider, the refund that
// undid it, the receipt and its correction (outbox and mailbox), and the audit trail.
import { checkoutOperationId, compensationKey, messageIdForKey, stepKey } from '../contract';
import { maskEmails } from '../reliability/redaction';
import type { EvidenceSources, Fact } from './facts';

const short = (e: unknown) => (e instanceof Error ? e.message : String(e));

export async function checkoutFacts(
  sources: EvidenceSources,
  cartId: string,
): Promise<{ facts: Fact[]; unavailable: string[] }> {
  const { store, stripe } = sources;
  const op = checkoutOperationId(cartId);
  const chargeKey = stepKey(op, 'charge_card');
  const receiptKey = stepKey(op, 'send_receipt');
  const facts: Fact[] = [];
  const unavailable: string[] = [];
  const cart = await store.checkouts.cart(cartId);
  facts.push({
    id: `store:cart:${cartId}`,
    says: cart
      ? `${cart.amount} ${cart.currency}; stock reserved by ${cart.reservedByKey ?? 'nobody'}, released by ${cart.releasedByKey ?? 'nobody'}`
      : 'no such cart',
  });
  const send = await store.sends.get(chargeKey, op);
  const receipt = send.receipt ? `receipt ${JSON.stringify(send.receipt)}` : 'no receipt';
  facts.push({
    id: `store:send:${chargeKey}`,
    says: `${send.requestsSent} charge request(s) sent; absence proven through ${send.provenAbsentThrough ?? 'none'}; ${receipt}`,
  });
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
    facts.push({
      id: `store:outbox:${key}`,
      says: `${entry.kind} ${entry.messageId} to ${maskEmails(entry.recipient)}: ${entry.status}; ${entry.attempts} hand-over attempt(s)`,
    });
    if (!sources.mailboxUrl) continue;
    const res = await fetch(
      `${sources.mailboxUrl}/messages?message_id=${encodeURIComponent(messageIdForKey(key))}`,
    ).catch((err: unknown) => err as Error);
    if (res instanceof Error || !res.ok)
      unavailable.push(`mailbox: ${res instanceof Error ? res.message : `HTTP ${res.status}`}`);
    else {
      const { messages } = (await res.json()) as { messages: unknown[] };
      facts.push({ id: `mailbox:${entry.messageId}`, says: `${messages.length} message(s) received` });
    }
  }
  for (const a of await store.operations.auditTrail(op))
    facts.push({ id: `store:audit:${a.seq}`, says: `${a.at} ${a.actor}: ${a.event} ${JSON.stringify(a.detail)}` });
  return { facts, unavailable };
}
