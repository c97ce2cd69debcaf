// The Stripe webhook receiver, POST /webhooks/stripe (docs/webhooks.md): a request not signed as the SDK's
// constructEvent checks is a 400 with no effect; an event is recorded once by its id and handed as a Signal to
// the run that holds its operation, and only then answered 2xx.
import { HttpError, listen, readBody, sendJson } from '../http/server';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import http from 'node:http';
import type Stripe from 'stripe';
import { WEBHOOK_PATH } from '../config';
import type { OrderStore } from '../store';
import { providerEventSignal, type ProviderEventSummary } from '../contract';
import { startFollowUp } from '../temporal/client';
import { lifecycleRank } from '../domain/order';

interface ReceiverDeps {
  stripe: Stripe;
  /** The endpoint's signing secret (`whsec_…`). */
  secret: string;
  store: OrderStore;
  temporal: Client;
  /** Where follow-up runs are started: the workers' task queue. */
  taskQueue?: string;
}

const MAX_BODY_BYTES = 512 * 1024;
/** How long close() waits for requests in flight: one records an event and sends a Signal. */
const CLOSE_WAIT_MS = 5000;
const REFUND_EVENTS = new Set(['refund.created', 'refund.updated', 'refund.failed', 'charge.refund.updated']);

/** Takes one signed webhook request: what to answer (200), after whatever it hands on is durable. */
async function handleWebhook(deps: ReceiverDeps, raw: string, signature: string): Promise<Record<string, unknown>> {
  let event: Stripe.Event;
  try {
    // A signature's timestamp may be 300 s old (Stripe's default).
    event = deps.stripe.webhooks.constructEvent(raw, signature, deps.secret, 300);
  } catch (err) {
    // The SDK says which: no matching signature, a timestamp outside the tolerance, or a body that is not JSON.
    throw new HttpError(400, `refused: ${(err as Error).message}`);
  }
  const object = event?.data?.object as Partial<Stripe.Refund> | undefined;
  if (
    typeof event?.id !== 'string' ||
    typeof event.type !== 'string' ||
    typeof event.created !== 'number' ||
    !object ||
    typeof object !== 'object'
  )
    throw new HttpError(400, 'malformed: an event needs an id, a type, a created time and data.object');
  if (!REFUND_EVENTS.has(event.type))
    return { received: event.id, handled: false, why: `${event.type} is not a refund event` };
  if (typeof object.id !== 'string' || typeof object.status !== 'string')
    throw new HttpError(400, 'malformed: a refund event needs data.object.id and data.object.status');
  const operationId = typeof object.metadata?.operation_id === 'string' ? object.metadata.operation_id : null;
  const amount = typeof object.amount === 'number' ? object.amount : null;
  const currency = typeof object.currency === 'string' ? object.currency : null;
  const news = { type: event.type, refundId: object.id, refundStatus: object.status };
  const { record, first } = await deps.store.providerEvents.receive({
    eventId: event.id,
    operationId,
    amount,
    currency,
    created: event.created,
    ...news,
  });
  // Handed on already (to a run, a follow-up, or kept with nothing to do): a redelivery changes nothing.
  if (!first && record.handedAt !== null) return { received: event.id, duplicate: true, handedTo: record.handedTo };
  if (!operationId) {
    await deps.store.providerEvents.handed(event.id, null, 'no operation: the refund carries no metadata.operation_id');
    return { received: event.id, handled: false, why: 'the refund carries no metadata.operation_id' };
  }
  // The run that holds the operation: the one that committed its intent.
  const workflowId = (await deps.store.operations.get(operationId))?.createdBy;
  if (!workflowId) {
    // Another environment's refund, or one this store never committed: nothing here to hand it to.
    await deps.store.providerEvents.handed(event.id, null, `no run: operation ${operationId} is not in this store`);
    return { received: event.id, handled: false, why: `operation ${operationId} is not in this store` };
  }
  const summary: ProviderEventSummary = {
    id: event.id,
    ...news,
    ...(amount !== null && { amount }),
    ...(currency !== null && { currency }),
    created: event.created,
    receivedAt: record.receivedAt,
  };
  try {
    await deps.temporal.workflow.getHandle(workflowId).signal(providerEventSignal, summary);
  } catch (err) {
    // The run has finished (a namespace that is not there is a configuration error: 503, and Stripe retries).
    const closed = err instanceof WorkflowNotFoundError && !/namespace/i.test(err.message);
    if (!closed) throw err;
    return lateEvent(deps, summary, operationId, workflowId);
  }
  await deps.store.providerEvents.handed(event.id, workflowId, 'signalled');
  return { received: event.id, handedTo: workflowId };
}

/**
 * An event for an operation whose run has finished: a refund that failed (or was canceled) after it goes to the
 * operation's follow-up run (signalWithStart); other news changes nothing and is kept on the audit trail.
 */
async function lateEvent(deps: ReceiverDeps, summary: ProviderEventSummary, operationId: string, workflowId: string) {
  const { id: eventId, type, refundId, refundStatus } = summary;
  const late = { eventId, type, refundId, refundStatus };
  const audit = (followUp: { workflowId: string; runId: string } | null) =>
    deps.store.operations.audit(operationId, 'webhook-receiver', 'late_provider_event', { ...late, followUp });
  if (lifecycleRank(refundStatus) < 2) {
    await deps.store.providerEvents.handed(eventId, workflowId, 'run closed: kept, nothing to do');
    await audit(null);
    return {
      received: eventId,
      handedTo: null,
      why: `${workflowId} has finished and the refund is ${refundStatus}; the event is kept`,
    };
  }
  // Another of the failure's events (refund.failed, refund.updated, charge.refund.updated) after the run or its follow-up compensated: nothing more to do.
  const done = (await deps.store.operations.auditTrail(operationId)).find(
    (a) => ['follow_up', 'run_stopped'].includes(a.event) && a.detail.status === 'compensated',
  );
  if (done) {
    await deps.store.providerEvents.handed(
      eventId,
      done.actor,
      'run closed: the failed refund was already compensated',
    );
    return { received: eventId, handedTo: null, why: `${done.actor} already compensated the failed refund` };
  }
  const started = await startFollowUp(deps.temporal, {
    operationId,
    originalWorkflowId: workflowId,
    event: summary,
    taskQueue: deps.taskQueue,
  });
  await deps.store.providerEvents.handed(eventId, started.workflowId, 'signalled follow-up');
  await audit(started);
  return { received: eventId, handedTo: started.workflowId };
}

export async function startWebhookReceiver(deps: ReceiverDeps, opts: { port: number; host?: string }) {
  let closing = false;
  const server = http.createServer((req, res) => {
    // While closing, a kept-alive connection ends with its answer, so close() does not wait on it.
    const answer = (status: number, body: Record<string, unknown>) =>
      sendJson(res, status, body, closing ? { Connection: 'close' } : {});
    (async () => {
      if (new URL(req.url ?? '/', 'http://x').pathname !== WEBHOOK_PATH)
        throw new HttpError(404, `no such path; Stripe webhooks go to POST ${WEBHOOK_PATH}`);
      if (req.method !== 'POST') throw new HttpError(405, `${req.method} is not allowed; Stripe webhooks are POSTed`);
      const header = req.headers['stripe-signature'];
      if (!header) throw new HttpError(400, 'unsigned: the request has no Stripe-Signature header');
      const raw = await readBody(req, MAX_BODY_BYTES);
      answer(200, await handleWebhook(deps, raw, Array.isArray(header) ? header[0] : header));
    })().catch((err: unknown) => {
      if (res.headersSent) return;
      if (err instanceof HttpError) return answer(err.status, { error: err.message });
      // Not recorded or not handed on: a 5xx makes the provider deliver it again later.
      console.error('[webhooks] could not take an event', err);
      answer(503, { error: 'the event could not be recorded or handed on; deliver it again later' });
    });
  });
  const port = await listen(server, opts.port, opts.host ?? '127.0.0.1');
  return {
    url: `http://${opts.host ?? '127.0.0.1'}:${port}${WEBHOOK_PATH}`,
    // Takes no new request and lets those in flight answer; one still open after CLOSE_WAIT_MS is cut
    // (unanswered, Stripe delivers it again, and a redelivery is recorded once).
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        const cut = setTimeout(() => server.closeAllConnections(), CLOSE_WAIT_MS);
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
