import type { RefundStep, TerminalStatus } from '../../contract';

/** Thrown inside the saga to end the run with a verdict; caught once, at the top. */
export class RunStopped extends Error {
  constructor(
    readonly status: Exclude<TerminalStatus, 'completed'>,
    readonly reason: string,
    readonly failedStep: RefundStep | null,
    readonly quarantined = false,
  ) {
    super(reason);
  }
}
