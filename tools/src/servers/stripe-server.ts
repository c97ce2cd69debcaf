// A local Stripe-compatible HTTP server for the endpoints the app uses, with Stripe's
// idempotency contract and a ledger of the effects it really performed.
import http from 'node:http';
import { ApiError, type ApiResponse, invalidRequest, newId } from './stripe/api';
import { FormError, parseForm, type FormParams } from './stripe/form';
import { createIdempotency, fingerprint, render } from './stripe/idempotency';
import { changeRefund, routes, type RefundLifecycle } from './stripe/resources';
import { signatureHeader } from './stripe/events';
import { createStripeFaults, stripeFaultSchema } from './stripe/faults';
import { openStore, type RequestRow } from './stripe/store';

export interface StripeServerOptions {
  /** 0 picks a free port. */
  port?: number;
  host?: string;
  /** A file path, or ':memory:'. */
  dbPath: string;
  idempotencyTtlMs?: number;
  hooks?: StripeServerHooks;
  /** Enables the fault API (POST /_faults), on loopback only. Off by default. */
  faults?: boolean;
  /** When refunds on the test payment methods settle or fail (default: pending ones settle after 30 s; failing ones fail at once). */
  lifecycle?: Partial<RefundLifecycle>;
  /** Webhook retries when an endpoint does not answer 2xx: exponential from `initialMs`, at most `maxMs` apart, `maxAttempts` in all. */
  webhookRetry?: Partial<WebhookRetry>;
  /** An endpoint kept configured at start-up (the local stack's receiver and its secret); a null secret removes it. */
  webhookEndpoint?: { url: string; secret: string | null };
}

export interface WebhookRetry {
  initialMs: number;
  maxMs: number;
  maxAttempts: number;
}

export interface StripeServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

export type StripeHookStage = 'beforeEffect' | 'afterEffect';

export interface StripeHookContext {
  stage: StripeHookStage;
  method: string;
  path: string;
  requestId: string;
  idempotencyKey: string | null;
  params: FormParams;
  /** The response the endpoint produced (and stored, if keyed); only at afterEffect. */
  response?: ApiResponse;
  /** Settles if the client goes away before it is answered (it closed the connection, e.g. on its own timeout). */
  clientGone: Promise<void>;
}

/**
 * The seam for fault injection. A hook may wait (to hold a request in flight) or return a
 * response to send instead. At beforeEffect a returned response is sent without executing and
 * without storing it (like a failure in front of the API); at afterEffect the effect and its
 * stored response stand and only the reply to this request changes (a lost response).
 */
export type StripeHook = (ctx: StripeHookContext) => ApiResponse | void | Promise<ApiResponse | void>;

export interface StripeServerHooks {
  beforeEffect?: StripeHook;
  afterEffect?: StripeHook;
}

const DAY_MS = 24 * 3600_000;
const MAX_BODY_BYTES = 1 << 20;

export async function startStripeServer(opts: StripeServerOptions): Promise<StripeServer> {
  const host = opts.host ?? '127.0.0.1';
  const store = openStore(opts.dbPath);
  if (opts.webhookEndpoint) store.events.configureEndpoint(opts.webhookEndpoint.url, opts.webhookEndpoint.secret);
  const idempotency = createIdempotency(store, opts.idempotencyTtlMs ?? DAY_MS);
  const hooks = opts.hooks ?? {};
  const faults = opts.faults ? createStripeFaults() : undefined;
  const lifecycle: RefundLifecycle = { settleDelayMs: 30_000, failDelayMs: 0, ...opts.lifecycle };
  // Like Stripe, which keeps trying for up to three days: doubling from a second to an hour apart, then hourly.
  const retry: WebhookRetry = { initialMs: 1000, maxMs: 3600_000, maxAttempts: 84, ...opts.webhookRetry };
  // Set just before the database closes: handlers resuming after an await must not touch it.
  let closed = false;
  const waits = new Set<() => void>();
  /** A delay that close() cuts short, so a stalled request never holds the server open. */
  const wait = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        waits.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      waits.add(done);
    });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const requestId = newId('req', 14);
    const method = req.method ?? 'GET';
    const key = method === 'POST' ? headerValue(req, 'idempotency-key') : undefined;
    const headers: Record<string, string> = { 'Request-Id': requestId };
    if (key !== undefined) headers['Idempotency-Key'] = key;
    const stripeVersion = headerValue(req, 'stripe-version');
    if (stripeVersion !== undefined) headers['Stripe-Version'] = stripeVersion;
    let logged: Omit<RequestRow, 'seq' | 'status' | 'replayed' | 'fault'> | undefined;
    const log = (status: number | null, extra: { replayed?: boolean; fault?: string } = {}) => {
      if (logged && !closed)
        store.recordRequest({ ...logged, status, replayed: extra.replayed ?? false, fault: extra.fault ?? null });
    };
    const send = (status: number, body: string, extra: Record<string, string> = {}) => {
      res.writeHead(status, { 'Content-Type': 'application/json', ...headers, ...extra });
      res.end(body);
    };
    const cut = () => {
      res.socket?.destroy();
      res.destroy();
    };

    try {
      const url = requestUrl(req);
      if (url.pathname.startsWith('/_')) {
        await admin(req, url, (status, body) => send(status, render(body)));
        return;
      }
      authenticate(req);
      const route = routes.find((r) => r.method === method && r.path.test(url.pathname));
      const match = route && route.path.exec(url.pathname);
      if (!route || !match) {
        throw new ApiError(404, {
          type: 'invalid_request_error',
          message: `Unrecognized request URL (${method}: ${url.pathname}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
        });
      }
      const params = parseParams(method === 'POST' ? await readBody(req) : url.search.slice(1));
      if (closed) return;
      const paymentIntent = typeof params.payment_intent === 'string' ? params.payment_intent : null;
      logged = {
        at: new Date().toISOString(),
        requestId,
        method,
        path: url.pathname,
        idempotencyKey: key ?? null,
        paymentIntent,
      };
      const print = fingerprint(method, url.pathname, params);
      const limited = faults?.edge({ method, path: url.pathname, idempotencyKey: key ?? null, params });
      if (limited) {
        log(limited.response.status, { fault: limited.fault.kind });
        send(limited.response.status, render(limited.response.body), limited.headers);
        return;
      }

      if (key !== undefined) {
        const replay = idempotency.lookup(key, print);
        if (replay) {
          log(replay.status, { replayed: true });
          send(replay.status, replay.body, {
            'Idempotent-Replayed': 'true',
            'Original-Request': replay.originalRequestId,
          });
          return;
        }
      }
      // Validation happens here; an ApiError thrown now is answered but never stored.
      let execute = route.endpoint(params, match.slice(1).map(pathArg));
      const facts = { method, path: url.pathname, idempotencyKey: key ?? null, params };
      const clientGone = new Promise<void>((resolve) => res.once('close', () => !res.writableEnded && resolve()));
      const ctx = { ...facts, requestId, clientGone };
      if (key !== undefined) idempotency.begin(key, print, requestId);

      let response: ApiResponse;
      let dropAfterCommit: string | undefined;
      try {
        const early = await hooks.beforeEffect?.({ stage: 'beforeEffect', ...ctx });
        if (closed) return;
        const fault = early ? undefined : faults?.before(facts);
        if (early || (fault && fault.kind !== 'delay' && fault.kind !== 'params')) {
          if (key !== undefined) idempotency.release(key);
          if (fault?.kind === 'drop') {
            log(null, { fault: fault.fault.kind });
            cut();
            return;
          }
          const reply = early ?? (fault as Extract<typeof fault, { kind: 'respond' }>).response;
          log(reply.status, { fault: fault?.fault.kind });
          send(reply.status, render(reply.body), fault?.kind === 'respond' ? fault.headers : {});
          return;
        }
        if (fault?.kind === 'delay') await wait(fault.ms);
        if (fault?.kind === 'params') {
          // The effect runs with other params (a partial refund) while the stored answer stays keyed to the request.
          execute = route.endpoint(fault.params, match.slice(1).map(pathArg));
          dropAfterCommit = fault.fault.kind;
        }
        if (closed) return;
        response = store.transaction(() => {
          let result: ApiResponse;
          try {
            // A savepoint, so a business error leaves no partial writes behind.
            result = store.transaction(() => execute({ store, idempotencyKey: key ?? null, requestId, lifecycle }));
          } catch (err) {
            if (!(err instanceof ApiError)) throw err;
            result = err.toResponse();
          }
          if (key !== undefined) idempotency.complete(key, result);
          return result;
        });
      } catch (err) {
        if (key !== undefined && !closed) idempotency.release(key);
        throw err;
      }

      const late = await hooks.afterEffect?.({ stage: 'afterEffect', ...ctx, response });
      if (closed) return;
      const lagMs = faults?.lag(facts);
      const created = (response.body as { id?: unknown }).id;
      if (lagMs !== undefined && typeof created === 'string' && created.startsWith('re_'))
        store.hideFromList(created, Date.now() + lagMs);
      const after = late ? undefined : faults?.after(facts);
      if (dropAfterCommit !== undefined || after?.kind === 'drop') {
        log(null, { fault: dropAfterCommit ?? after?.fault.kind });
        cut();
        return;
      }
      if (after?.kind === 'delay') {
        await wait(after.ms);
        if (closed) return;
      }
      const reply = late ?? response;
      log(res.destroyed ? null : reply.status, { fault: after?.fault.kind });
      if (!res.destroyed) send(reply.status, render(reply.body));
    } catch (err) {
      // A client that went away mid-request (e.g. while sending the body) has no one left to answer.
      if (closed || res.headersSent || res.destroyed) return;
      if (err instanceof ApiError) {
        log(err.status);
        const extra: Record<string, string> = err.status === 401 ? { 'WWW-Authenticate': 'Bearer realm="Stripe"' } : {};
        send(err.status, render(err.toResponse().body), extra);
        return;
      }
      console.error(`[stripe-server] ${method} ${req.url} failed`, err);
      log(500);
      send(500, render({ error: { type: 'api_error', message: 'An unknown error occurred' } }));
    }
  }

  /** The server's own endpoints: the ledger and request log (read-only), and the fault API (loopback, when enabled). */
  async function admin(
    req: http.IncomingMessage,
    url: URL,
    reply: (status: number, body: unknown) => void,
  ): Promise<void> {
    const method = req.method ?? 'GET';
    const q = (name: string) => url.searchParams.get(name) ?? undefined;
    if (method === 'GET' && url.pathname === '/_ledger')
      return reply(200, { effects: store.ledger(q('payment_intent')) });
    if (method === 'GET' && url.pathname === '/_requests') {
      return reply(200, {
        requests: store.requests({
          idempotencyKey: q('idempotency_key'),
          paymentIntent: q('payment_intent'),
          path: q('path'),
        }),
      });
    }
    if (method === 'GET' && url.pathname === '/_webhooks') {
      return reply(200, {
        endpoints: store.events.endpoints().map(({ secret: _s, ...e }) => e),
        deliveries: store.events.deliveries({ eventId: q('event'), endpointId: q('endpoint') }),
      });
    }
    if (method === 'GET' && url.pathname === '/_events')
      return reply(200, { events: store.events.events({ objectId: q('object') }) });
    if (method === 'POST' && url.pathname === '/_webhooks/resend') {
      const event = q('event');
      if (!event)
        return reply(400, {
          error: { type: 'invalid_request_error', message: 'name the event: /_webhooks/resend?event=evt_…' },
        });
      return reply(200, { resent: store.events.resend(event) });
    }
    const settle = /^\/_refunds\/([A-Za-z0-9_]+)\/settle$/.exec(url.pathname);
    if (method === 'POST' && settle) {
      // A refund's scheduled change (settling or failing) now instead of at its delay, then the webhooks as usual.
      if (store.events.expediteTransitions(settle[1]!, Date.now()) === 0)
        return reply(404, {
          error: { type: 'invalid_request_error', message: `refund ${settle[1]} has no scheduled change to settle` },
        });
      applyDueTransitions(settle[1]);
      return reply(200, { refund: store.getRefund(settle[1]!) });
    }
    const faultPath = /^\/_faults(?:\/([A-Za-z0-9_]+))?$/.exec(url.pathname);
    if (!faultPath)
      return reply(404, {
        error: {
          type: 'invalid_request_error',
          message: `no admin endpoint ${method} ${url.pathname}; try /_ledger, /_requests, /_webhooks, /_events, /_refunds/<id>/settle or /_faults`,
        },
      });
    if (!faults)
      return reply(404, {
        error: {
          type: 'invalid_request_error',
          message: 'fault injection is off; start the server with it enabled (FAULT_INJECTION=on)',
        },
      });
    if (!isLoopback(req.socket.remoteAddress))
      return reply(403, {
        error: { type: 'invalid_request_error', message: 'the fault API answers only on loopback' },
      });
    const [, id] = faultPath;
    if (method === 'GET' && id === undefined) return reply(200, { faults: faults.list() });
    if (method === 'DELETE') return reply(200, { cleared: faults.clear(id) });
    if (method === 'POST' && id === undefined) {
      let body: unknown;
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        return reply(400, {
          error: {
            type: 'invalid_request_error',
            message: 'the body must be a JSON fault, e.g. {"kind":"drop_after_commit","match":{"path":"/v1/refunds"}}',
          },
        });
      }
      const parsed = stripeFaultSchema.safeParse(body);
      if (!parsed.success) {
        const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(fault)'}: ${i.message}`).join('; ');
        return reply(400, { error: { type: 'invalid_request_error', message: `invalid fault: ${problems}` } });
      }
      return reply(200, { fault: faults.arm(parsed.data) });
    }
    return reply(405, {
      error: { type: 'invalid_request_error', message: `${method} is not allowed on ${url.pathname}` },
    });
  }

  /**
   * Refunds' scheduled changes, then webhook deliveries: each POSTs the event, signed with the
   * endpoint's secret, and counts as delivered only on a 2xx; otherwise it is tried again later,
   * at least once in all, in no guaranteed order across events.
   */
  function applyDueTransitions(refundId?: string): void {
    for (const t of store.events.dueTransitions(Date.now())) {
      if (refundId !== undefined && t.refundId !== refundId) continue;
      try {
        store.transaction(() => {
          changeRefund(store, t.refundId, t.toStatus, t.failureReason);
          store.events.transitionDone(t.seq);
        });
      } catch (err) {
        // One bad row must not hold up every other change and delivery.
        console.error(`[stripe-server] refund ${t.refundId} could not move to ${t.toStatus}`, err);
        store.events.transitionDone(t.seq);
      }
    }
  }

  let ticking = false;
  async function tick(): Promise<void> {
    if (ticking || closed) return;
    ticking = true;
    try {
      applyDueTransitions();
      await Promise.all(
        store.events.due(Date.now(), 20).map(async (d) => {
          let status: number | null = null;
          let error: string | null = null;
          try {
            const res = await fetch(d.url, {
              method: 'POST',
              headers: {
                'Content-Type': 'application/json; charset=utf-8',
                'Stripe-Signature': signatureHeader(d.payload, d.secret, Math.floor(Date.now() / 1000)),
                'User-Agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
              },
              body: d.payload,
              signal: AbortSignal.timeout(10_000),
            });
            status = res.status;
            await res.arrayBuffer().catch(() => undefined);
          } catch (err) {
            error = (err as Error).message;
          }
          if (closed) return;
          const delivered = status !== null && status >= 200 && status < 300;
          const attempt = d.attempts + 1;
          const retryAtMs =
            delivered || attempt >= retry.maxAttempts
              ? null
              : Date.now() + Math.min(retry.maxMs, retry.initialMs * 2 ** (attempt - 1));
          store.events.attempted(d.eventId, d.endpointId, { status, error, delivered, retryAtMs });
        }),
      );
    } catch (err) {
      if (!closed) console.error('[stripe-server] webhook delivery failed', err);
    } finally {
      ticking = false;
    }
  }
  const ticker = setInterval(() => void tick(), 100);
  ticker.unref();

  const server = http.createServer((req, res) => {
    // Last line of defence: a rejection here would be unhandled and take the whole servers process down.
    handle(req, res).catch((err: unknown) => {
      console.error(`[stripe-server] ${req.method} ${req.url} could not be answered`, err);
      res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    close() {
      clearInterval(ticker);
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Keep-alive sockets (the Stripe SDK and fetch both pool them) would hold close() open.
        server.closeAllConnections();
      }).finally(() => {
        closed = true;
        for (const done of [...waits]) done();
        store.close();
      });
      return closing;
    },
  };
}

/** Request targets such as "//a:b" are no valid URL; they get Stripe's 400 instead of an exception. */
function requestUrl(req: http.IncomingMessage): URL {
  try {
    return new URL(req.url ?? '/', 'http://localhost');
  } catch {
    throw invalidRequest(`Invalid request URL: ${req.url}`);
  }
}

function isLoopback(address: string | undefined): boolean {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1';
}

function headerValue(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Any test-mode secret key is accepted, as Bearer (the SDK) or Basic with the key as user (curl -u). */
function authenticate(req: http.IncomingMessage): void {
  const header = headerValue(req, 'authorization') ?? '';
  const [scheme = '', credentials = ''] = header.split(/\s+/, 2);
  let apiKey = '';
  if (scheme.toLowerCase() === 'bearer') apiKey = credentials;
  if (scheme.toLowerCase() === 'basic')
    apiKey = Buffer.from(credentials, 'base64').toString('utf8').split(':')[0] ?? '';
  if (apiKey === '') {
    throw new ApiError(401, {
      type: 'authentication_error',
      message:
        "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
    });
  }
  if (!apiKey.startsWith('sk_test_')) {
    const masked = `${apiKey.slice(0, 8)}${'*'.repeat(Math.max(0, apiKey.length - 12))}${apiKey.slice(-4)}`;
    throw new ApiError(401, {
      type: 'authentication_error',
      code: 'api_key_invalid',
      message: `Invalid API Key provided: ${masked}. This local Stripe accepts only test-mode secret keys (sk_test_...).`,
    });
  }
}

function pathArg(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ApiError(400, { type: 'invalid_request_error', message: `Invalid URL path segment: ${segment}` });
  }
}

function parseParams(encoded: string): FormParams {
  try {
    return parseForm(encoded);
  } catch (err) {
    if (err instanceof FormError)
      throw new ApiError(400, { type: 'invalid_request_error', message: err.message, param: err.param });
    throw err;
  }
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES)
      throw new ApiError(413, { type: 'invalid_request_error', message: 'Request body too large.' });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
