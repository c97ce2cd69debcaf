// A local Stripe-compatible HTTP server for the endpoints the app uses, with Stripe's
// idempotency contract and a ledger of the effects it really performed.
import http from 'node:http';
import { ApiError, type ApiResponse, invalidRequest, newId } from './stripe/api';
import { FormError, parseForm, type FormParams } from './stripe/form';
import { createIdempotency, fingerprint, render } from './stripe/idempotency';
import { routes } from './stripe/resources';
import { openStore } from './stripe/store';

export interface StripeServerOptions {
  /** 0 picks a free port. */
  port?: number;
  host?: string;
  /** A file path, or ':memory:'. */
  dbPath: string;
  idempotencyTtlMs?: number;
  hooks?: StripeServerHooks;
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
  const idempotency = createIdempotency(store, opts.idempotencyTtlMs ?? DAY_MS);
  const hooks = opts.hooks ?? {};
  // Set just before the database closes: handlers resuming after an await must not touch it.
  let closed = false;

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const requestId = newId('req', 14);
    const method = req.method ?? 'GET';
    const key = method === 'POST' ? headerValue(req, 'idempotency-key') : undefined;
    const headers: Record<string, string> = { 'Request-Id': requestId };
    if (key !== undefined) headers['Idempotency-Key'] = key;
    const stripeVersion = headerValue(req, 'stripe-version');
    if (stripeVersion !== undefined) headers['Stripe-Version'] = stripeVersion;
    const send = (status: number, body: string, extra: Record<string, string> = {}) => {
      res.writeHead(status, { 'Content-Type': 'application/json', ...headers, ...extra });
      res.end(body);
    };

    try {
      const url = requestUrl(req);
      if (method === 'GET' && url.pathname === '/_ledger') {
        const pi = url.searchParams.get('payment_intent') ?? undefined;
        send(200, render({ effects: store.ledger(pi) }));
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
      const print = fingerprint(method, url.pathname, params);

      if (key !== undefined) {
        const replay = idempotency.lookup(key, print);
        if (replay) {
          send(replay.status, replay.body, { 'Idempotent-Replayed': 'true', 'Original-Request': replay.originalRequestId });
          return;
        }
      }
      // Validation happens here; an ApiError thrown now is answered but never stored.
      const execute = route.endpoint(params, match.slice(1).map(pathArg));
      const ctx = { method, path: url.pathname, requestId, idempotencyKey: key ?? null, params };
      if (key !== undefined) idempotency.begin(key, print, requestId);

      let response: ApiResponse;
      try {
        const early = await hooks.beforeEffect?.({ stage: 'beforeEffect', ...ctx });
        if (closed) return;
        if (early) {
          if (key !== undefined) idempotency.release(key);
          send(early.status, render(early.body));
          return;
        }
        response = store.transaction(() => {
          let result: ApiResponse;
          try {
            // A savepoint, so a business error leaves no partial writes behind.
            result = store.transaction(() => execute({ store, idempotencyKey: key ?? null }));
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
      const reply = late ?? response;
      send(reply.status, render(reply.body));
    } catch (err) {
      // A client that went away mid-request (e.g. while sending the body) has no one left to answer.
      if (closed || res.headersSent || res.destroyed) return;
      if (err instanceof ApiError) {
        const extra: Record<string, string> = err.status === 401 ? { 'WWW-Authenticate': 'Bearer realm="Stripe"' } : {};
        send(err.status, render(err.toResponse().body), extra);
        return;
      }
      console.error(`[stripe-server] ${method} ${req.url} failed`, err);
      send(500, render({ error: { type: 'api_error', message: 'An unknown error occurred' } }));
    }
  }

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
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Keep-alive sockets (the Stripe SDK and fetch both pool them) would hold close() open.
        server.closeAllConnections();
      }).finally(() => {
        closed = true;
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
  if (scheme.toLowerCase() === 'basic') apiKey = Buffer.from(credentials, 'base64').toString('utf8').split(':')[0] ?? '';
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
    if (err instanceof FormError) throw new ApiError(400, { type: 'invalid_request_error', message: err.message, param: err.param });
    throw err;
  }
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, { type: 'invalid_request_error', message: 'Request body too large.' });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
