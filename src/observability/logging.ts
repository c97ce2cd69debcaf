// The worker's logs as JSON lines, written by pino: the SDK's own messages and every activity's
// (which carry the workflow id, the activity and its attempt), and our attempt runner's (which add
// the operation id and the step). Installed as the Temporal Runtime's logger at worker start.
import type { Logger, LogLevel, LogMetadata } from '@temporalio/common';
import pino from 'pino';
import type { LogLevelName } from '../config';
import { maskEmails } from '../reliability/redaction';

/** A Temporal Logger that writes through pino. */
export class PinoLogger implements Logger {
  constructor(readonly pino: pino.Logger) {}

  log(level: LogLevel, message: string, meta?: LogMetadata): void {
    this.pino[level.toLowerCase() as LogLevelName](meta ? jsonSafe(meta) : {}, message);
  }

  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }

  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }

  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }

  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }

  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}

/** JSON lines to `destination` (stdout by default), with the level as a word and ISO times. */
export function createLogger(level: LogLevelName, destination?: pino.DestinationStream): PinoLogger {
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
  return new PinoLogger(destination ? pino(options, destination) : pino(options));
}

/** The SDK passes bigints (e.g. event ids) in metadata, which JSON cannot hold: they are written as strings. */
function jsonSafe(meta: LogMetadata): LogMetadata {
  return Object.values(meta).some((v) => typeof v === 'bigint')
    ? Object.fromEntries(Object.entries(meta).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : v]))
    : meta;
}
