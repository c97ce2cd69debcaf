// How a run stops: a value (Stopped) a saga returns up to the harness, the one place that parks the run or ends it.
// Only a step call the harness makes throws one (a StoppedError), caught by the harness too.
import type { TerminalStatus } from '../../contract';

/** The run ends with this status, or parks for a person when it needs one: a saga returns it, the harness acts on it. */
export class Stopped<Step extends string = string> {
  constructor(
    readonly status: Exclude<TerminalStatus, 'completed'>,
    readonly reason: string,
    readonly failedStep: Step | null,
    readonly quarantined = false,
  ) {}
}

/** Whether an outcome is a stop, which its caller returns at once: `if (isStopped(x)) return x;`. */
export const isStopped = <Step extends string, T>(outcome: T | Stopped<Step>): outcome is Stopped<Step> =>
  outcome instanceof Stopped;

/** A stop thrown by a step call the harness makes (a refusal its definition `rejects`), caught by the harness alone. */
export class StoppedError extends Error {
  constructor(readonly stopped: Stopped) {
    super(stopped.reason);
  }
}
