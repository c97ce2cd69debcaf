// The Temporal Runtime's telemetry, installed once per worker process before any connection: the
// Core's native logs forwarded to our pino logger at LOG_LEVEL (so every line is JSON), and the
// SDK's metrics with the project's own (metrics.ts) exported to Prometheus or an OTLP collector.
import type { LogLevel } from '@temporalio/common';
import type { TelemetryOptions } from '@temporalio/worker';
import type { Config } from '../config';

export function telemetryOptions(config: Pick<Config, 'logLevel' | 'metrics'>): TelemetryOptions {
  const level = config.logLevel.toUpperCase() as LogLevel;
  // The Core's dependencies (gRPC, HTTP) are chatty below WARN: they follow LOG_LEVEL only when it is stricter.
  const other: LogLevel = ['WARN', 'ERROR'].includes(level) ? level : 'WARN';
  const { prometheusAddress, otlpUrl } = config.metrics;
  return {
    logging: { forward: {}, filter: { core: level, other } },
    // The SDK's metrics keep their temporal_ prefix and names (Temporal's dashboards read them); ours carry refunds_.
    ...(prometheusAddress && { metrics: { prometheus: { bindAddress: prometheusAddress } } }),
    // A collector's OTLP/HTTP endpoint is its /v1/metrics path; any other URL is OTLP/gRPC (usually port 4317).
    ...(otlpUrl && { metrics: { otel: { url: otlpUrl, http: /\/v1\/metrics\/?$/.test(otlpUrl) } } }),
  };
}
