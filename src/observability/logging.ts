// The worker's logs as JSON lines, written by pino: the SDK's own messages and every activity's
// (which carry the workflow id, the activity and its attempt), and our attempt runner's (which add
// the operation id and the step). Installed as the Temporal Runtime's logger at worker start.
import type { Logger, LogMetadata } from '@temporalio/common';
import { DefaultLogger } from '@temporalio/worker';
import pino from 'pino';
import type { LogLevelName } from '../config';
import { maskEmails } from '../reliability/redaction';

/** A Temporal Logger writing JSON lines to `destination` (stdout by default), with the level as a word and ISO times. */
export function createLogger(level: LogLevelName, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'durable-refunds-worker', pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // The SDK logs failures under `error`; pino's own serializer keeps their message and stack, with addresses masked.
    serializers: {
      error: (err: unknown) =>
        err instanceof Error ? JSON.parse(maskEmails(JSON.stringify(pino.stdSerializers.err(err)))) : err,
    },
  };
  // Stdout written asynchronously: a line (one an attempt) is a copy into pino's buffer, not a write(2) on the thread
  // that logged it. pino writes what is left synchronously when the process exits, process.exit included (the drain's).
  const out = pino(options, destination ?? pino.destination({ dest: 1, sync: false }));
  // Every level goes through: pino filters at LOG_LEVEL.
  return new DefaultLogger('TRACE', (entry) =>
    out[entry.level.toLowerCase() as LogLevelName](entry.meta ? jsonSafe(entry.meta) : {}, entry.message),
  );
}

/** The SDK passes bigints (e.g. event ids) in metadata, which JSON cannot hold: they are written as strings. */
function jsonSafe(meta: LogMetadata): LogMetadata {
  return Object.values(meta).some((v) => typeof v === 'bigint')
    ? Object.fromEntries(Object.entries(meta).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : v]))
    : meta;
}
