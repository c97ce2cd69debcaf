// Traces of runs and their activities through Temporal's OpenTelemetry interceptors
// (@temporalio/interceptors-opentelemetry, on the OpenTelemetry 1.x SDK): each workflow run and
// each activity attempt becomes a span, linked across the worker's own client calls, exported to
// the console or to an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, read by the exporter itself).
import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';

export const TRACE_EXPORTERS = ['none', 'console', 'otlp'] as const;
export type TraceExporter = (typeof TRACE_EXPORTERS)[number];

/** The module every workflow bundle includes (bundleWorkflowCode's workflowInterceptorModules), so that one bundle serves with tracing on or off. */
export const WORKFLOW_TRACING_MODULE = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

export interface WorkerTracing {
  activityInterceptors: ActivityInterceptorsFactory[];
  /** The `exporter` sink the bundled workflow interceptors call: real with tracing on, a no-op with it off. */
  sinks: InjectedSinks<Record<string, never>>;
  clientInterceptors: WorkflowClientInterceptor[];
  /** Flushes what is buffered and stops exporting. */
  shutdown(): Promise<void>;
}

const OFF: WorkerTracing = {
  activityInterceptors: [],
  sinks: { exporter: { export: { fn: () => undefined } } } as unknown as InjectedSinks<Record<string, never>>,
  clientInterceptors: [],
  shutdown: async () => undefined,
};

/** The tracing a worker runs with. `exporter` may be a SpanExporter of the caller's (tests). */
export function startTracing(exporter: TraceExporter | SpanExporter, serviceName: string): WorkerTracing {
  if (exporter === 'none') return OFF;
  const processor: SpanProcessor =
    exporter === 'console' ? new SimpleSpanProcessor(new ConsoleSpanExporter()) : exporter === 'otlp' ? new BatchSpanProcessor(new OTLPTraceExporter()) : new SimpleSpanProcessor(exporter);
  const resource = new Resource({ 'service.name': serviceName });
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  const tracer = provider.getTracer('durable-refunds');
  // Activities read their run's trace context from the task's headers through the global propagator
  // (W3C, as the workflow side writes it) and make it current through the global context manager.
  propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  return {
    activityInterceptors: [(ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) })],
    sinks: { exporter: makeWorkflowExporter(processor, resource) } as unknown as InjectedSinks<Record<string, never>>,
    clientInterceptors: [new OpenTelemetryWorkflowClientInterceptor({ tracer })],
    shutdown: () => provider.shutdown(),
  };
}
