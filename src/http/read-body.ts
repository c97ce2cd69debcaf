// Reading a request body with a size limit, for the small HTTP servers of the worker (the webhook
// receiver, the codec server).
import type http from 'node:http';

/** A refusal with its HTTP status. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The body as text; a body over `maxBytes` is refused with 413, and the connection dropped. */
export function readBody(req: http.IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new HttpError(413, `the body is larger than ${maxBytes} bytes`);
    if (Number(req.headers['content-length'] ?? 0) > maxBytes) return reject(tooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else {
        reject(tooLarge());
        req.destroy();
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
