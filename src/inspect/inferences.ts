// What the facts say about a run's three effects (the refund, the order, the customer's email and its
// correction): inferences, each confirmed, to be confirmed, or contradicted by the facts it names.
import type { RefundResult, RefundRunState } from '../contract';
import { effectOfRecord } from '../reliability/effect-of-record';
import type { Inference } from '../reliability/verdict';
import type { Evidence } from './facts';

const ACTIVE = (r: { status: string | null }) => r.status !== 'failed' && r.status !== 'canceled';

const inference = (claim: string, status: Inference['status'], basis: string[], check?: string): Inference => ({
  claim,
  status,
  basis,
  ...(check && { check }),
});

/** What the facts say about the three effects: the refund, the order, the customer's email (and its correction). */
export function infer(state: RefundRunState | null, result: RefundResult | null, ev: Evidence): Inference[] {
  // A refund the provider failed after the run finished is failed, whatever the run last believed.
  const failedLater = ev.operation?.status === 'failed';
  // A run that says nothing was sent while the record holds a send of open outcome (an older run's word) is overruled by the record.
  const recorded = ev.operation ? effectOfRecord(ev.operation).status : 'none';
  const said = state?.effect.status === 'none' && recorded === 'unknown' ? recorded : state?.effect.status;
  const belief = failedLater ? 'failed' : (said ?? (result?.status === 'completed' ? 'refunded' : recorded));
  const refundId =
    state?.effect.refundId ??
    (result?.status === 'completed' ? result.refund.refundId : (ev.operation?.refund?.refundId ?? null));
  const updated = state?.steps.find((s) => s.name === 'update_order');
  const out = [
    refundInference(ev, belief, refundId),
    orderInference(ev, belief, updated?.status === 'completed' && !updated.compensation),
    emailInference('the customer notice', ev.notice, ev.noticeMessageId, ev.mailbox?.notice ?? null),
  ];
  if (ev.correction)
    out.push(emailInference('the correction', ev.correction, ev.correctionMessageId, ev.mailbox?.correction ?? null));
  return out;
}

function refundInference(ev: Evidence, belief: string, refundId: string | null): Inference {
  const basis = ev.facts.filter((f) => f.id.startsWith('stripe:') || f.id.startsWith('ledger:')).map((f) => f.id);
  // The provider's list says which refunds stand; the local server's ledger, which were ever made under our key.
  const active = ev.refunds?.filter(ACTIVE) ?? null;
  const made = ev.ledgerRefunds;
  const ask = `ask Stripe for the refunds of the order's payment intent with metadata.operation_id ${ev.operationId}`;
  if (active === null && made === null) return inference(`the refund is ${belief}`, 'to be confirmed', [], ask);
  if ((active?.length ?? 0) > 1 || (made ?? 0) > 1)
    return inference(`exactly one refund exists for operation ${ev.operationId}`, 'contradicted', basis);
  if (belief === 'refunded' || belief === 'partial') {
    const matches = active ? active.length === 1 && (refundId === null || active[0]!.id === refundId) : made === 1;
    const claim = `refund ${refundId ?? active?.[0]?.id ?? '(no id)'} exists at the provider, once`;
    return inference(claim, matches ? 'confirmed' : 'contradicted', basis);
  }
  if (belief === 'unknown') {
    if ((active?.length ?? made) === 1) {
      const claim = `a refund exists for this operation${active?.[0] ? ` (${active[0].id})` : ''}, which the run has not yet recorded`;
      return inference(claim, 'confirmed', basis);
    }
    const check =
      'none is listed now, but a request in flight may still land and the list can lag: retry-step create_refund reconciles before anything is sent';
    return inference('no refund exists for this operation', 'to be confirmed', basis, check);
  }
  // none or failed: nothing should stand.
  if (active) return inference('nothing was refunded', active.length === 0 ? 'confirmed' : 'contradicted', basis);
  if (made === 0) return inference('nothing was refunded', 'confirmed', basis);
  const check = `a refund was made under this key: ${ask}, and check that it failed`;
  return inference('nothing was refunded', 'to be confirmed', basis, check);
}

/** `claimed`: the run's update_order step says it recorded the refund and nothing took it off. */
function orderInference(ev: Evidence, belief: string, claimed: boolean): Inference {
  const order = `store:order:${ev.order?.id ?? ''}`;
  const applied = `store:applied:${ev.operationId}`;
  if (ev.applied?.revertedByKey)
    return inference('the order was restored: the refund was taken off it by its compensation', 'confirmed', [applied]);
  if (ev.applied) {
    const should = belief === 'refunded' || belief === 'partial' || belief === 'unknown';
    const status = should ? 'confirmed' : 'contradicted';
    return inference(`the order records refund ${ev.applied.refundId}`, status, [applied, order]);
  }
  const status = claimed ? 'contradicted' : 'confirmed';
  return inference('the order does not show a refund for this operation', status, [order]);
}

/** `received` is null when the mailbox could not be read. */
function emailInference(what: string, entry: Evidence['notice'], messageId: string, received: number | null) {
  const readable = received !== null;
  const basis = [...(entry ? [`store:outbox:${entry.key}`] : []), ...(readable ? [`mailbox:${messageId}`] : [])];
  const about = (claim: string, status: Inference['status'], check?: string) =>
    inference(`${what} ${claim}`, status, basis, check);
  const lookFor = `look for Message-ID ${messageId} at the mail provider`;
  if (!readable)
    return about(entry ? `${messageId} reached the mail server` : 'was not sent', 'to be confirmed', lookFor);
  if (!entry) return about('was not sent', received ? 'contradicted' : 'confirmed');
  if (received > 1) return about(`${messageId} was delivered once`, 'contradicted');
  if (received === 1)
    return about(`${messageId} reached the mailbox, once`, entry.status === 'pending' ? 'contradicted' : 'confirmed');
  if (entry.status === 'sent') return about(`${messageId} reached the mailbox`, 'contradicted');
  if (entry.status === 'sending')
    return about(
      `${messageId} was not delivered`,
      'to be confirmed',
      'its hand-over never learned the answer and it is not in the mailbox now; a resend goes out with the same Message-ID',
    );
  return about('was not sent', 'confirmed');
}
