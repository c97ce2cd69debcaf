// How a run stops: the harness's own throw, from the step that stopped it to the one place that
// parks the run or ends it. A saga's code never catches it.
import type { TerminalStatus } from '../../contract';

/** The run ends, or parks for a person, with this verdict: thrown by the harness only, caught once, at the top. */
export class RunStopped<Step extends string = string> extends Error {
  constructor(
    readonly status: Exclude<TerminalStatus, 'completed'>,
    readonly reason: string,
    readonly failedStep: Step | null,
    readonly quarantined = false,
  ) {
    super(reason);
  }
}

/** Stops the run: it ends with this status, or parks for a person when it needs one. */
export function stop(
  status: RunStopped['status'],
  reason: string,
  failedStep: string | null,
  quarantined = false,
): never {
  throw new RunStopped(status, reason, failedStep, quarantined);
}
