// Traces through Temporal's OpenTelemetry interceptors (@temporalio/interceptors-opentelemetry, on
// the OpenTelemetry 1.x SDK): each activity attempt becomes a span carrying its workflow id and
// run id, and the worker's own client calls (follow-ups, scheduled starts) spans of their own,
// exported to the console or to an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, read by the exporter itself).
//
// The package's workflow interceptors are deliberately not bundled: with them, a run that took a
// decision through an Update failed to replay (TMPRL1100 "Update machine does not handle this
// event: ActivityTaskScheduled") when it was queried after it closed, so they would break inspect
// and any worker that replays such a run. inspect.test.ts replays exactly that.
import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { Resource } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { TraceExporter } from '../config';

export interface WorkerTracing {
  activityInterceptors: ActivityInterceptorsFactory[];
  clientInterceptors: WorkflowClientInterceptor[];
  /** Flushes what is buffered and stops exporting. */
  shutdown(): Promise<void>;
}

/** The tracing a worker runs with. `exporter` may be a SpanExporter of the caller's (tests). */
export function startTracing(exporter: TraceExporter | SpanExporter, serviceName: string): WorkerTracing {
  if (exporter === 'none') return { activityInterceptors: [], clientInterceptors: [], shutdown: async () => undefined };
  const processor: SpanProcessor =
    exporter === 'console'
      ? new SimpleSpanProcessor(new ConsoleSpanExporter())
      : exporter === 'otlp'
        ? new BatchSpanProcessor(new OTLPTraceExporter())
        : new SimpleSpanProcessor(exporter);
  const resource = new Resource({ 'service.name': serviceName });
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  const tracer = provider.getTracer('durable-refunds');
  // Activities read their run's trace context from the task's headers through the global propagator
  // (W3C, as the workflow side writes it) and make it current through the global context manager.
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  return {
    activityInterceptors: [
      (ctx) => ({
        inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
        outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
      }),
    ],
    clientInterceptors: [new OpenTelemetryWorkflowClientInterceptor({ tracer })],
    shutdown: () => provider.shutdown(),
  };
}
