// The provider of the model: Stripe's refunds (create with idempotency keys, list, retrieve) behind
// Node's http.request, so that the real Stripe SDK and the real StripeTransport (its send deadline,
// its one timer for the whole exchange, its "sent or not" stages) are what the payment activities
// talk through. Why not a real HTTP server: a socket's timing is the operating system's, so a run
// could not be replayed from its seed, and the transport's timer would run on real time; here
// every event on the wire (the request written, the answer, the connection cut) happens when the
// model says, and the transport's timer fires in the model's true time.
//
// What the provider promises (the contract the protocol relies on, stated so the model can hold it):
// a create commits only while its request is on the wire, i.e. between being written whole and the
// client's end of it (its answer, its timer, its worker's death); a committed refund shows in list
// results after a lag of at most the list consistency window; a key is remembered for the key window
// and answers a resend with the first result (while the first is still processing: 409).
import { EventEmitter } from 'node:events';
import http from 'node:http';
import { Readable } from 'node:stream';
import type { VirtualTime } from './virtual-time';

export interface Refund {
  id: string;
  operationId: string;
  orderId: string;
  amount: number;
  currency: string;
  paymentIntent: string;
  committedAt: number;
  visibleAt: number;
  /** Which request made it (for the counterexample's story). */
  by: string;
}

/** How the provider treats a new create: acts on it after a processing delay (if it is still on the wire), or holds it for a command. */
/** commit_proxy_*: a proxy in front of the provider forwarded the create, which committed, and answered the client itself. */
export type How = 'commit_answer' | 'commit_cut' | 'cut' | 'commit_proxy_503' | 'commit_proxy_429';
export type Processing = { delayMs: number; how: How; listLagMs: number } | 'hold';

export interface WireRequest {
  id: number;
  method: string;
  path: string;
  key: string | null;
  params: URLSearchParams;
  operationId: string | null;
  /** The attempt that sent it (see the model's attempt labels). */
  attempt: string;
  writtenAt: number;
  /** On the wire until the client has its answer or gives up; only then can nothing more happen for it. */
  state: 'held' | 'answered' | 'ended';
  req: FakeClientRequest;
}

interface KeyEntry {
  firstAt: number;
  body: string;
  response: { status: number; body: unknown } | null;
}

/** A ClientRequest as far as StripeTransport uses one: end, destroy, and finish/response/error events. */
class FakeClientRequest extends EventEmitter {
  closed = false;
  constructor(
    readonly provider: FakeProvider,
    readonly opts: http.RequestOptions,
    readonly attempt: string,
  ) {
    super();
  }

  end(body?: string): this {
    this.provider.arrive(this, body ?? '');
    return this;
  }

  destroy(err?: Error): this {
    if (this.closed) return this;
    this.closed = true;
    this.provider.clientGone(this);
    process.nextTick(() => {
      if (err) this.emit('error', err);
      this.emit('close');
    });
    return this;
  }
}

export class FakeProvider {
  readonly refunds: Refund[] = [];
  readonly requests: WireRequest[] = [];
  private readonly keys = new Map<string, KeyEntry>();
  private nextRequest = 1;
  /** Set when something the provider sees breaks the promise (e.g. a refund on top of an unsettled earlier one). */
  readonly violations: string[] = [];
  /** Called when a create commits, before it is visible to anyone: the model's checks at the moment of commit. */
  onCommit: (refund: Refund) => void = () => undefined;

  constructor(
    private readonly time: VirtualTime,
    private readonly keyWindowMs: number,
    /** Which attempt the code calling http.request runs in. */
    private readonly attemptHere: () => string,
    /** How each new create is processed, in turn; once used up, creates are held. */
    private readonly plan: Processing[] = [],
  ) {}

  /** Routes http.request to this provider until the returned function is called. */
  install(): () => void {
    const original = http.request;
    (http as { request: unknown }).request = (opts: http.RequestOptions) =>
      new FakeClientRequest(this, opts, this.attemptHere());
    return () => {
      (http as { request: unknown }).request = original;
    };
  }

  /** Creates still held by the provider (processing, not yet answered). */
  held(): WireRequest[] {
    return this.requests.filter((r) => r.state === 'held');
  }

  /** Requests of an operation that could still commit: written and not ended. */
  live(operationId: string): WireRequest[] {
    return this.requests.filter((r) => r.operationId === operationId && r.method === 'POST' && r.state === 'held');
  }

  refundsOf(operationId: string): Refund[] {
    return this.refunds.filter((r) => r.operationId === operationId);
  }

  arrive(req: FakeClientRequest, body: string): void {
    const [path, query] = (req.opts.path ?? '/').split('?');
    const method = req.opts.method ?? 'GET';
    const headers = req.opts.headers as Record<string, string> | undefined;
    const params = new URLSearchParams(method === 'POST' ? body : (query ?? ''));
    const key = headers?.['Idempotency-Key'] ?? null;
    const wire: WireRequest = {
      id: this.nextRequest++,
      method,
      path: path!,
      key,
      params,
      operationId: params.get('metadata[operation_id]'),
      attempt: req.attempt,
      writtenAt: this.time.now,
      state: 'held',
      req,
    };
    this.requests.push(wire);
    // Written whole: from here the provider may act on it (the transport now calls it "sent").
    process.nextTick(() => {
      if (req.closed) return;
      req.emit('finish');
      if (method === 'GET') this.answerRead(wire);
      else this.receiveCreate(wire, body);
    });
  }

  clientGone(req: FakeClientRequest): void {
    const wire = this.requests.find((r) => r.req === req);
    if (!wire || wire.state !== 'held') return;
    wire.state = 'ended';
    // Not committed while on the wire: by the contract it never will be, and the key keeps nothing.
    if (wire.key && this.keys.get(wire.key)?.response === null) this.keys.delete(wire.key);
  }

  /** The provider acts on a held create: commits it (answering, or cutting the connection after), or cuts it without committing. */
  act(wire: WireRequest, how: How, listLagMs: number): void {
    if (wire.state !== 'held') return;
    if (how === 'cut') {
      this.clientGone(wire.req);
      wire.req.emit('error', Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
      return;
    }
    const refund = this.commit(wire, listLagMs);
    const entry = this.keys.get(wire.key ?? '');
    const response = { status: 200, body: this.refundObject(refund) };
    if (entry) entry.response = response;
    if (how === 'commit_answer') this.respond(wire, response.status, response.body, {});
    else if (how === 'commit_proxy_503' || how === 'commit_proxy_429') {
      // The proxy's own answer: no request id of the provider's, and not the provider's error body.
      this.respond(wire, how === 'commit_proxy_503' ? 503 : 429, { message: 'upstream unavailable' }, {}, false);
    } else {
      wire.state = 'ended';
      wire.req.emit('error', Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    }
  }

  /** Which refunds a list shows now: committed at least their list lag ago, newest first. */
  visible(paymentIntent: string): Refund[] {
    return this.refunds.filter((r) => r.paymentIntent === paymentIntent && r.visibleAt <= this.time.now).reverse();
  }

  private receiveCreate(wire: WireRequest, body: string): void {
    const entry = wire.key ? this.keys.get(wire.key) : undefined;
    if (entry && this.time.now < entry.firstAt + this.keyWindowMs) {
      if (entry.body !== body)
        return this.respond(
          wire,
          400,
          stripeError(
            'idempotency_error',
            'Keys for idempotent requests can only be used with the same parameters they were first used with.',
          ),
          {},
        );
      if (entry.response === null)
        return this.respond(
          wire,
          409,
          stripeError('idempotency_error', 'There is currently another in-progress request using this Idempotent Key.'),
          {},
        );
      return this.respond(wire, entry.response.status, entry.response.body, { 'idempotent-replayed': 'true' });
    }
    // A new key, or one past its window (Stripe forgot it): processed as a new request.
    if (wire.key) this.keys.set(wire.key, { firstAt: this.time.now, body, response: null });
    const processing = this.plan.shift() ?? 'hold';
    if (processing !== 'hold')
      this.time.setTimer(() => this.act(wire, processing.how, processing.listLagMs), processing.delayMs);
  }

  private commit(wire: WireRequest, listLagMs: number): Refund {
    const p = wire.params;
    const refund: Refund = {
      id: `re_${this.refunds.length + 1}`,
      operationId: p.get('metadata[operation_id]') ?? '',
      orderId: p.get('metadata[order_id]') ?? '',
      amount: Number(p.get('amount')),
      currency: 'usd',
      paymentIntent: p.get('payment_intent') ?? '',
      committedAt: this.time.now,
      visibleAt: this.time.now + listLagMs,
      by: `request #${wire.id} of ${wire.attempt}`,
    };
    this.onCommit(refund);
    this.refunds.push(refund);
    return refund;
  }

  private answerRead(wire: WireRequest): void {
    const id = /^\/v1\/refunds\/([^/]+)$/.exec(wire.path)?.[1];
    if (id) {
      const refund = this.refunds.find((r) => r.id === id);
      if (!refund)
        return this.respond(
          wire,
          404,
          stripeError('invalid_request_error', `No such refund: '${id}'`, 'resource_missing'),
          {},
        );
      return this.respond(wire, 200, this.refundObject(refund), {});
    }
    const data = this.visible(wire.params.get('payment_intent') ?? '').map((r) => this.refundObject(r));
    this.respond(wire, 200, { object: 'list', data, has_more: false, url: '/v1/refunds' }, {});
  }

  private respond(
    wire: WireRequest,
    status: number,
    body: unknown,
    headers: Record<string, string>,
    fromProvider = true,
  ): void {
    if (wire.state !== 'held') return;
    wire.state = 'answered';
    const res = Object.assign(new Readable({ read() {} }), {
      statusCode: status,
      headers: {
        'content-type': 'application/json',
        ...(fromProvider && { 'request-id': `req_${wire.id}` }),
        ...headers,
      },
      complete: false,
    });
    wire.req.emit('response', res);
    res.complete = true;
    res.push(JSON.stringify(body));
    res.push(null);
  }

  private refundObject(r: Refund) {
    return {
      id: r.id,
      object: 'refund',
      amount: r.amount,
      currency: r.currency,
      payment_intent: r.paymentIntent,
      status: 'succeeded',
      created: Math.floor(r.committedAt / 1000),
      metadata: { order_id: r.orderId, operation_id: r.operationId },
    };
  }
}

function stripeError(type: string, message: string, code?: string) {
  return { error: { type, message, ...(code && { code }) } };
}
