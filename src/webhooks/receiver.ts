// The Stripe webhook receiver: POST /webhooks/stripe. It checks the signature with the official
// SDK (constructEvent, with its clock-skew tolerance) and answers anything unsigned, badly signed,
// too old or malformed with a 400 and no effect. It records each event once by its id, finds the
// refund's operation by `metadata.operation_id`, and hands the event to the run that holds the
// operation as a Signal; it answers 2xx only once the event is recorded and, for a running run,
// durably in Temporal's history.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import http from 'node:http';
import type Stripe from 'stripe';
import type { OrderStore } from '../store';
import { providerEventSignal } from '../workflows/provider-events';

export interface ReceiverDeps {
  stripe: Stripe;
  /** The endpoint's signing secret (`whsec_…`). */
  secret: string;
  /** How old a signature's timestamp may be, in seconds (Stripe's default: 300). */
  toleranceSec?: number;
  store: OrderStore;
  temporal: Client;
}

export const WEBHOOK_PATH = '/webhooks/stripe';
const MAX_BODY_BYTES = 512 * 1024;
const REFUND_EVENTS = new Set(['refund.created', 'refund.updated', 'refund.failed', 'charge.refund.updated']);

class Refused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return reject(new Refused(413, `the body is larger than ${MAX_BODY_BYTES} bytes`));
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY_BYTES) chunks.push(c);
      else {
        reject(new Refused(413, `the body is larger than ${MAX_BODY_BYTES} bytes`));
        req.destroy();
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The run that holds an operation: the one that committed its intent. */
async function runFor(store: OrderStore, operationId: string): Promise<string | undefined> {
  return (await store.operations.get(operationId))?.createdBy;
}

export type Handled = { status: number; body: Record<string, unknown> };

/** Takes one webhook request: what to answer, after whatever it hands on is durable. */
export async function handleWebhook(deps: ReceiverDeps, raw: string, signature: string | undefined): Promise<Handled> {
  if (!signature) throw new Refused(400, 'unsigned: the request has no Stripe-Signature header');
  let event: Stripe.Event;
  try {
    event = deps.stripe.webhooks.constructEvent(raw, signature, deps.secret, deps.toleranceSec ?? 300);
  } catch (err) {
    // The SDK says which: no matching signature, a timestamp outside the tolerance, or a body that is not JSON.
    throw new Refused(400, `refused: ${(err as Error).message}`);
  }
  const object = event?.data?.object as Partial<Stripe.Refund> | undefined;
  if (typeof event?.id !== 'string' || typeof event.type !== 'string' || typeof event.created !== 'number' || !object || typeof object !== 'object') {
    throw new Refused(400, 'malformed: an event needs an id, a type, a created time and data.object');
  }
  if (!REFUND_EVENTS.has(event.type)) return { status: 200, body: { received: event.id, handled: false, why: `${event.type} is not a refund event` } };
  if (typeof object.id !== 'string' || typeof object.status !== 'string') throw new Refused(400, 'malformed: a refund event needs data.object.id and data.object.status');
  const operationId = typeof object.metadata?.operation_id === 'string' ? object.metadata.operation_id : null;
  const { record, first } = await deps.store.providerEvents.receive({
    eventId: event.id,
    type: event.type,
    operationId,
    refundId: object.id,
    refundStatus: object.status,
    created: event.created,
  });
  if (!first && record.outcome === 'signalled') return { status: 200, body: { received: event.id, duplicate: true, handedTo: record.handedTo } };
  if (!operationId) {
    await deps.store.providerEvents.handed(event.id, null, 'no operation: the refund carries no metadata.operation_id');
    return { status: 200, body: { received: event.id, handled: false, why: 'the refund carries no metadata.operation_id' } };
  }
  const workflowId = await runFor(deps.store, operationId);
  if (!workflowId) {
    // Another environment's refund, or one this store never committed: nothing here to hand it to.
    await deps.store.providerEvents.handed(event.id, null, `no run: operation ${operationId} is not in this store`);
    return { status: 200, body: { received: event.id, handled: false, why: `operation ${operationId} is not in this store` } };
  }
  try {
    await deps.temporal.workflow.getHandle(workflowId).signal(providerEventSignal, {
      id: event.id,
      type: event.type,
      refundId: object.id,
      refundStatus: object.status,
      created: event.created,
      receivedAt: record.receivedAt,
    });
  } catch (err) {
    // The run has finished (a namespace that is not there is a configuration error: 503, and Stripe retries).
    const closed = err instanceof WorkflowNotFoundError && !/namespace/i.test(err.message);
    if (!closed) throw err;
    // A follow-up run for events after a run finished (a late failure) is not built yet: the event is kept,
    // and a refund that moved after its run finished is written to the operation's audit trail for a person.
    await deps.store.providerEvents.handed(event.id, workflowId, 'run closed: kept for a follow-up');
    await deps.store.operations.audit(operationId, 'webhook-receiver', 'late_provider_event', { eventId: event.id, type: event.type, refundId: object.id, refundStatus: object.status });
    if (object.status === 'failed' || object.status === 'canceled') {
      console.warn(`[webhooks] refund ${object.id} of ${operationId} is ${object.status} after ${workflowId} finished: a person must put the order and the customer right`);
    }
    return { status: 200, body: { received: event.id, handedTo: null, why: `${workflowId} has finished; the event is kept` } };
  }
  await deps.store.providerEvents.handed(event.id, workflowId, 'signalled');
  return { status: 200, body: { received: event.id, handedTo: workflowId } };
}

export async function startWebhookReceiver(deps: ReceiverDeps, opts: { port: number; host?: string }): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const answer = (status: number, body: Record<string, unknown>) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    (async () => {
      if (new URL(req.url ?? '/', 'http://x').pathname !== WEBHOOK_PATH) throw new Refused(404, `no such path; Stripe webhooks go to POST ${WEBHOOK_PATH}`);
      if (req.method !== 'POST') throw new Refused(405, `${req.method} is not allowed; Stripe webhooks are POSTed`);
      const header = req.headers['stripe-signature'];
      if (!header) throw new Refused(400, 'unsigned: the request has no Stripe-Signature header');
      const raw = await readBody(req);
      const handled = await handleWebhook(deps, raw, Array.isArray(header) ? header[0] : header);
      answer(handled.status, handled.body);
    })().catch((err: unknown) => {
      if (res.headersSent) return;
      if (err instanceof Refused) return answer(err.status, { error: err.message });
      // Not recorded or not handed on: a 5xx makes the provider deliver it again later.
      console.error('[webhooks] could not take an event', err);
      answer(503, { error: 'the event could not be recorded or handed on; deliver it again later' });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://${opts.host ?? '127.0.0.1'}:${port}${WEBHOOK_PATH}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
