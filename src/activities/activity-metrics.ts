// The project's metrics as activities record them. The SDK gives each activity execution a meter of its own, and an
// instrument made on it is a call into the Core that serves that execution only; over the worker's meter, each is made
// once per process and labelled at each call with what the SDK's meter would add.
import { Context } from '@temporalio/activity';
import type { MetricMeter, MetricTags } from '@temporalio/common';
import { refundMetrics, type RefundMetrics } from '../observability/metrics';

/** The recorder for the activity running now. */
export type ActivityMetrics = () => RefundMetrics;

/** The labels the SDK's activity meter adds (its getMetricTags; test/unit/metrics.test.ts holds the two alike). */
function activityLabels(): MetricTags {
  const { namespace, taskQueue, activityType } = Context.current().info;
  return { namespace, taskQueue, activityType };
}

/** `meter`: the worker's (Runtime's) meter, when it exports metrics; without one, each activity's own meter. */
export function activityMetrics(meter?: MetricMeter): ActivityMetrics {
  if (!meter) return () => refundMetrics(Context.current().metricMeter);
  const shared = refundMetrics(meter, activityLabels);
  return () => shared;
}
