// The Stripe SDK's HTTP client, replaced so that every failure says whether the request could have reached Stripe,
// and the SDK never resends on its own (it resends after ECONNRESET/EPIPE even with maxNetworkRetries 0; our errors
// never carry those codes). A write has a connection of its own: a stale pooled socket would turn a request that never
// left into a lost response, which is reconciled, never resent. Reads reuse kept-alive connections.
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import Stripe from 'stripe';
import type { Attempt } from './attempt';
import { beforeRequest, requestTimeout } from './request-deadline';

/** not_sent: never completely handed to the network, so not acted on. sent: no complete answer; it may have been. */
export type TransportStage = 'not_sent' | 'sent';

/** A failed request, with the stage at which it failed. Its code is never one the SDK resends on. */
export class TransportError extends Error {
  override name = 'TransportError';
  readonly code: 'ETIMEDOUT' | 'REQUEST_NOT_SENT' | 'RESPONSE_LOST';

  constructor(
    readonly stage: TransportStage,
    readonly timedOut: boolean,
    readonly socketError: string | null,
    message: string,
  ) {
    super(message);
    // The SDK words its message from ETIMEDOUT; neither code is in its list of codes to resend on.
    this.code = timedOut ? 'ETIMEDOUT' : stage === 'sent' ? 'RESPONSE_LOST' : 'REQUEST_NOT_SENT';
  }
}

/** Kept-alive connections for reads, shared by every client in the process; an idle one is closed after a second, before a server would close it. */
const READ_AGENTS = {
  http: new http.Agent({ keepAlive: true, timeout: 1000 }),
  https: new https.Agent({ keepAlive: true, timeout: 1000 }),
};

/** What the SDK hands its HTTP client for one request: host, port, path, method, headers, body, protocol, timeout. */
type RequestArgs = Parameters<Stripe.HttpClient['makeRequest']>;

/** `attempt`: the activity attempt this client sends for, told of every request (none outside one, e.g. in the CLIs). */
export class StripeTransport extends Stripe.HttpClient {
  /** Null while its pooled client is given back: it sends nothing until it is lent again. */
  constructor(public attempt?: Attempt | null) {
    super();
  }

  override getClientName(): string {
    return 'durable-refunds';
  }

  override makeRequest(...request: RequestArgs): Promise<Stripe.HttpClientResponse> {
    const [, , path, method] = request;
    // Read once: the request stays its attempt's should the client be given back and lent again meanwhile.
    const { attempt } = this;
    if (attempt === null) return Promise.reject(notSent(`${method} ${path}: not sent: its attempt has ended`));
    return beforeRequest(attempt).then(
      () => this.send(attempt, ...request),
      (err: Error) => Promise.reject(notSent(`${method} ${path}: not sent: ${err.message}`)),
    );
  }

  private send(
    attempt: Attempt | undefined,
    ...[host, port, path, method, headers, body, protocol, timeoutMs]: RequestArgs
  ): Promise<Stripe.HttpClientResponse> {
    // Every request ends inside its attempt (what is left of its start-to-close), and a stamped send's by its deadline,
    // whenever they begin: the request's own timeout is cut to what is left.
    const sendBy = attempt?.sendBy;
    const timeout = attempt ? requestTimeout(attempt, timeoutMs) : timeoutMs;
    const left = sendBy === undefined ? timeout : Math.min(timeout, sendBy - Date.now());
    /** Once the send's deadline has passed (the worker stalled), what keeps the request from going out under its stamp. */
    const tooLate = () => {
      const past = sendBy === undefined ? -1 : Date.now() - sendBy;
      return past < 0
        ? undefined
        : notSent(`${method} ${path}: not sent, ${past} ms past the deadline its send was stamped for`);
    };
    if (left <= 0) return Promise.reject(tooLate());
    const limit = left < timeout ? `by its send's deadline (${left} ms)` : `within ${timeout} ms`;
    return new Promise((resolve, reject) => {
      let written = false;
      let timedOut = false;
      const fail = (err: Error & { code?: string }) => {
        if (err instanceof TransportError) return reject(err);
        const what = timedOut ? `no answer ${limit}` : `${err.code ?? err.name}: ${err.message}`;
        const message = `${method} ${path}: ${what} (${written ? 'after the request was sent' : 'before it was sent'})`;
        reject(new TransportError(written ? 'sent' : 'not_sent', timedOut, err.code ?? null, message));
      };
      const agent = method === 'GET' ? READ_AGENTS[protocol === 'http' ? 'http' : 'https'] : false;
      const req = (protocol === 'http' ? http : https).request({ host, port, path, method, headers, agent });
      // One deadline for the whole exchange, answer included: not an idle timeout that a trickle could extend.
      const timer = setTimeout(() => {
        timedOut = true;
        req.destroy(new Error('timeout'));
      }, left);
      req.once('finish', () => {
        if (attempt) attempt.requests += 1;
      });
      req.once('error', (err) => {
        clearTimeout(timer);
        fail(err);
      });
      req.once('response', (res) => {
        // Node joins a repeated header into one string (set-cookie aside), so an answered request's id is a string.
        const requestId = res.headers['request-id'];
        if (attempt && typeof requestId === 'string' && requestId) attempt.providerRequestId = requestId;
        resolve(new TransportResponse(res, timer, () => timedOut, limit));
      });
      // Nothing is written before the connection is up (a stall there may outlast the deadline), and then only if it has not passed.
      req.once('socket', (socket) =>
        whenConnected(socket, () => {
          const late = tooLate();
          if (late) return req.destroy(late);
          // From the first byte handed to the socket, a failure may follow a request the server has read.
          written = true;
          req.end(body);
        }),
      );
    });
  }
}

/** Our transport declined to send: nothing reached the network. */
const notSent = (message: string) => new TransportError('not_sent', false, null, message);

/** Runs `then` once the socket can carry the request: at once for a kept-alive one, after the TLS handshake for a new TLS one. */
function whenConnected(socket: Socket, then: () => void): void {
  if (!socket.connecting) return then();
  socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', then);
}

/** An answer read whole (no streamed ones are asked for, nor any resent: the SDK's dispose and toStream go unused). */
class TransportResponse extends Stripe.HttpClientResponse {
  constructor(
    private readonly res: http.IncomingMessage,
    private readonly timer: NodeJS.Timeout,
    private readonly timedOut: () => boolean,
    /** How the deadline reads in a message: "within 10000 ms", or by the send's deadline. */
    private readonly limit: string,
  ) {
    super(res.statusCode ?? 0, res.headers as Record<string, string>);
  }

  override getRawResponse(): http.IncomingMessage {
    return this.res;
  }

  override toJSON(): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let text = '';
      const lost = (err?: Error) => {
        clearTimeout(this.timer);
        const why = this.timedOut() ? `no complete answer ${this.limit}` : (err?.message ?? 'connection closed');
        const cause = new TransportError('sent', this.timedOut(), null, `the answer was cut off: ${why}`);
        reject(Stripe.HttpClient.makeResponseBodyError(cause));
      };
      this.res.setEncoding('utf8');
      this.res.on('data', (chunk: string) => {
        text += chunk;
      });
      this.res.once('error', lost);
      this.res.once('close', () => {
        if (!this.res.complete) lost();
      });
      this.res.once('end', () => {
        clearTimeout(this.timer);
        try {
          resolve(this._parseResponseBody(text));
        } catch (err) {
          reject(err);
        }
      });
    });
  }
}
