// Temporal does not tell workflow code how many attempts an activity took. This worker-side
// interceptor adds the attempt number to every activity result and failure, so the step
// table can show it; the step runner unwraps it.
import { Context } from '@temporalio/activity';
import { ApplicationFailure, TemporalFailure } from '@temporalio/common';
import type { ActivityInboundCallsInterceptor, ActivityExecuteInput, Next } from '@temporalio/worker';

export interface Attempted<T> {
  value: T;
  attempt: number;
}

export class AttemptsInterceptor implements ActivityInboundCallsInterceptor {
  async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const { attempt } = Context.current().info;
    try {
      return { value: await next(input), attempt } satisfies Attempted<unknown>;
    } catch (err) {
      if (err instanceof ApplicationFailure) {
        throw ApplicationFailure.create({
          type: err.type ?? undefined,
          message: err.message,
          nonRetryable: err.nonRetryable ?? false,
          nextRetryDelay: err.nextRetryDelay,
          details: [{ attempt, details: err.details ?? [] }],
        });
      }
      if (err instanceof TemporalFailure || !(err instanceof Error)) throw err; // e.g. cancellation
      throw ApplicationFailure.create({ type: err.name, message: err.message, details: [{ attempt }] });
    }
  }
}
