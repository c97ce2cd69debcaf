// What the facts say about a run's three effects (the refund, the order, the customer's email and its
// correction): inferences, each confirmed, to be confirmed, or contradicted by the facts it names.
import type { RefundResult, RefundRunState } from '../contract';
import { effectOfRecord } from '../reliability/effect-of-record';
import type { Evidence } from './facts';

export interface Inference {
  claim: string;
  /** confirmed by the facts it names; to be confirmed where there is no evidence; contradicted by them. */
  status: 'confirmed' | 'to be confirmed' | 'contradicted';
  basis: string[];
  /** For one to be confirmed: how to confirm it. */
  check?: string;
}

const ACTIVE = (r: { status: string | null }) => r.status !== 'failed' && r.status !== 'canceled';

/** What the facts say about the three effects: the refund, the order, the customer's email (and its correction). */
export function infer(state: RefundRunState | null, result: RefundResult | null, ev: Evidence): Inference[] {
  const out: Inference[] = [];
  // A refund the provider failed after the run finished is failed, whatever the run last believed.
  const failedLater = ev.operation?.status === 'failed';
  // A run that says nothing was sent while the record holds a send of open outcome (an older run's word) is overruled by the record.
  const recorded = ev.operation ? effectOfRecord(ev.operation).status : 'none';
  const said = state?.effect.status === 'none' && recorded === 'unknown' ? recorded : state?.effect.status;
  const belief = failedLater ? 'failed' : (said ?? (result?.status === 'completed' ? 'refunded' : recorded));
  const refundId =
    state?.effect.refundId ??
    (result?.status === 'completed' ? result.refund.refundId : (ev.operation?.refund?.refundId ?? null));
  const basis = ev.facts.filter((f) => f.id.startsWith('stripe:') || f.id.startsWith('ledger:')).map((f) => f.id);
  // The provider's list says which refunds stand; the local server's ledger, which were ever made under our key.
  const active = ev.refunds?.filter(ACTIVE) ?? null;
  const made = ev.ledgerRefunds;
  const ask = `ask Stripe for the refunds of the order's payment intent with metadata.operation_id ${ev.operationId}`;
  if (active === null && made === null)
    out.push({ claim: `the refund is ${belief}`, status: 'to be confirmed', basis: [], check: ask });
  else if ((active?.length ?? 0) > 1 || (made ?? 0) > 1)
    out.push({ claim: `exactly one refund exists for operation ${ev.operationId}`, status: 'contradicted', basis });
  else if (belief === 'refunded' || belief === 'partial') {
    const matches = active ? active.length === 1 && (refundId === null || active[0]!.id === refundId) : made === 1;
    out.push({
      claim: `refund ${refundId ?? active?.[0]?.id ?? '(no id)'} exists at the provider, once`,
      status: matches ? 'confirmed' : 'contradicted',
      basis,
    });
  } else if (belief === 'unknown') {
    if ((active?.length ?? made) === 1) {
      out.push({
        claim: `a refund exists for this operation${active?.[0] ? ` (${active[0].id})` : ''}, which the run has not yet recorded`,
        status: 'confirmed',
        basis,
      });
    } else {
      out.push({
        claim: 'no refund exists for this operation',
        status: 'to be confirmed',
        basis,
        check:
          'none is listed now, but a request in flight may still land and the list can lag: retry-step create_refund reconciles before anything is sent',
      });
    }
  } else if (active) {
    // none or failed: nothing should stand.
    out.push({ claim: 'nothing was refunded', status: active.length === 0 ? 'confirmed' : 'contradicted', basis });
  } else {
    out.push({
      claim: 'nothing was refunded',
      status: made === 0 ? 'confirmed' : 'to be confirmed',
      basis,
      ...(made !== 0 && { check: `a refund was made under this key: ${ask}, and check that it failed` }),
    });
  }

  const steps = state?.steps;
  const updated = steps?.find((s) => s.name === 'update_order');
  const appliedId = `store:applied:${ev.operationId}`;
  if (ev.applied?.revertedByKey)
    out.push({
      claim: 'the order was restored: the refund was taken off it by its compensation',
      status: 'confirmed',
      basis: [appliedId],
    });
  else if (ev.applied) {
    const should = belief === 'refunded' || belief === 'partial' || belief === 'unknown';
    out.push({
      claim: `the order records refund ${ev.applied.refundId}`,
      status: should ? 'confirmed' : 'contradicted',
      basis: [appliedId, `store:order:${ev.order?.id ?? ''}`],
    });
  } else {
    const claimed = updated?.status === 'completed' && !updated.compensation;
    out.push({
      claim: 'the order does not show a refund for this operation',
      status: claimed ? 'contradicted' : 'confirmed',
      basis: [`store:order:${ev.order?.id ?? ''}`],
    });
  }

  out.push(emailInference('the customer notice', ev.notice, ev.noticeMessageId, ev.mailbox?.notice ?? null));
  if (ev.correction)
    out.push(emailInference('the correction', ev.correction, ev.correctionMessageId, ev.mailbox?.correction ?? null));
  return out;
}

/** `received` is null when the mailbox could not be read. */
function emailInference(
  what: string,
  entry: Evidence['notice'],
  messageId: string,
  received: number | null,
): Inference {
  const readable = received !== null;
  const basis = [...(entry ? [`store:outbox:${entry.key}`] : []), ...(readable ? [`mailbox:${messageId}`] : [])];
  const check = `look for Message-ID ${messageId} at the mail provider`;
  if (!entry) {
    if (!readable) return { claim: `${what} was not sent`, status: 'to be confirmed', basis, check };
    return { claim: `${what} was not sent`, status: received ? 'contradicted' : 'confirmed', basis };
  }
  if (!readable)
    return { claim: `${what} ${messageId} reached the mail server`, status: 'to be confirmed', basis, check };
  if (received > 1) return { claim: `${what} ${messageId} was delivered once`, status: 'contradicted', basis };
  if (received === 1)
    return {
      claim: `${what} ${messageId} reached the mailbox, once`,
      status: entry.status === 'pending' ? 'contradicted' : 'confirmed',
      basis,
    };
  if (entry.status === 'sent')
    return { claim: `${what} ${messageId} reached the mailbox`, status: 'contradicted', basis };
  if (entry.status === 'sending') {
    return {
      claim: `${what} ${messageId} was not delivered`,
      status: 'to be confirmed',
      basis,
      check: `its hand-over never learned the answer and it is not in the mailbox now; a resend goes out with the same Message-ID`,
    };
  }
  return { claim: `${what} was not sent`, status: 'confirmed', basis };
}
