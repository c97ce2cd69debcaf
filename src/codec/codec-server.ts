// The codec server the Temporal Web UI and the `temporal` CLI call to show decoded payloads
// (POST …/encode and …/decode, Payloads as protobuf JSON), for one namespace's keys. It answers
// the configured Web UI origins only (CORS), and, with a token set, only bearers of it.
import type { PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import http from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { HttpError, listen, readBody, sendJson } from '../http/server';
import { urlHost, type Config } from '../config';
import { payloadKeyring } from './data-converter';
import { EncryptionCodec } from './encryption-codec';

export interface CodecServerOptions {
  codec: PayloadCodec;
  /** The namespace whose payloads these keys encrypt; a request naming another (X-Namespace) is refused. */
  namespace: string;
  /** Browser origins allowed to call it: the Web UI's. Requests without an Origin (the CLI) are not browsers' and pass. */
  origins: string[];
  authToken?: string;
  port: number;
  host?: string;
}

/**
 * The one way a codec server is started from the configuration, with the workers' keys: by
 * `npm run codec-server` and by the local stack. Undefined with PAYLOAD_ENCRYPTION=off.
 */
export async function startConfiguredCodecServer(config: Config) {
  const keyring = payloadKeyring(config);
  if (!keyring) return undefined;
  const codec = new EncryptionCodec(keyring, { compress: config.encryption.compress });
  const server = await startCodecServer({ ...config.codec, codec, namespace: config.temporal.namespace });
  const c = config.codec;
  const summary =
    `codec server on ${server.url} for namespace ${config.temporal.namespace}, keys ${[...keyring.keys.keys()].join(', ')} (encrypting with ${keyring.current}); ` +
    `answers ${c.origins.join(', ')}${c.authToken ? ', bearer token required' : ''}`;
  return { server, summary };
}

const MAX_BODY = 16 * 1024 * 1024;
const Payloads = temporal.api.common.v1.Payloads;

function bearerMatches(header: string | undefined, token: string): boolean {
  const given = Buffer.from(header?.replace(/^Bearer\s+/i, '') ?? '');
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export type CodecServer = Awaited<ReturnType<typeof startCodecServer>>;

export async function startCodecServer(options: CodecServerOptions) {
  const { codec, namespace, origins, authToken } = options;

  async function answer(req: http.IncomingMessage): Promise<unknown> {
    const action = new URL(req.url ?? '/', 'http://codec').pathname.split('/').at(-1);
    if (req.method !== 'POST' || (action !== 'encode' && action !== 'decode'))
      throw new HttpError(404, 'POST …/encode or …/decode');
    const origin = req.headers.origin;
    if (origin !== undefined && !origins.includes(origin))
      throw new HttpError(403, `origin ${origin} is not allowed (CODEC_CORS_ORIGINS)`);
    if (authToken && !bearerMatches(req.headers.authorization, authToken))
      throw new HttpError(401, 'a bearer token is required');
    // The `temporal` CLI sends the header empty: only a namespace it names is checked.
    const asked = req.headers['x-namespace'];
    if (asked && asked !== namespace)
      throw new HttpError(403, `this codec server holds the keys of namespace ${namespace}, not ${String(asked)}`);
    let payloads;
    try {
      payloads = Payloads.fromObject(JSON.parse(await readBody(req, MAX_BODY))).payloads;
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new HttpError(400, `the body is not Payloads as protobuf JSON: ${(err as Error).message}`);
    }
    try {
      const out = action === 'encode' ? await codec.encode(payloads) : await codec.decode(payloads);
      return Payloads.toObject(Payloads.fromObject({ payloads: out }), { bytes: String });
    } catch (err) {
      throw new HttpError(422, (err as Error).message);
    }
  }

  const server = http.createServer((req, res) => {
    const origin = req.headers.origin;
    if (origin !== undefined && origins.includes(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Credentials', 'true');
      res.setHeader('Vary', 'Origin');
    }
    if (req.method === 'OPTIONS') {
      res.writeHead(origin !== undefined && origins.includes(origin) ? 204 : 403, {
        'Access-Control-Allow-Methods': 'POST, OPTIONS',
        'Access-Control-Allow-Headers': 'Content-Type, X-Namespace, Authorization',
        'Access-Control-Max-Age': '600',
      });
      res.end();
      return;
    }
    answer(req).then(
      (body) => sendJson(res, 200, body),
      (err: unknown) => sendJson(res, err instanceof HttpError ? err.status : 500, { error: (err as Error).message }),
    );
  });
  const port = await listen(server, options.port, options.host ?? '127.0.0.1');
  return {
    url: `http://${urlHost(options.host ?? '127.0.0.1')}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
