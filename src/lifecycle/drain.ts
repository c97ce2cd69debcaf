// How a worker process stops for a deploy. The first SIGTERM (or SIGINT) turns readiness false and
// stops every pool polling; the tasks in flight get the grace time to finish (a Stripe request's
// answer is then recorded, not lost to an unknown outcome), and only then does the rest close.
// Each phase is logged with how long it took.
import type { Logger } from '@temporalio/common';
import type { RecoveryPolicy } from '../reliability/policy';

/**
 * Past the grace time the SDK cancels what still runs; this long after, it stops waiting for it
 * (shutdownForceTime) and the process exits, leaving those attempts to their timeouts and retries.
 */
export const FORCE_AFTER_GRACE_MS = 1000;

/** A second signal this soon after the first is the same stop delivered twice, not an operator insisting. */
export const REPEAT_WINDOW_MS = 2000;

/**
 * The grace time: as configured, else the policy's longest attempt (startToClose), which holds a whole
 * Stripe request with its bookkeeping, or an SMTP hand-over; past it Temporal has given the attempt up.
 */
export function shutdownGraceMs(configured: number | undefined, policy: RecoveryPolicy): number {
  return configured ?? Math.max(...Object.values(policy.timeouts).map((t) => t.startToCloseMs));
}

export class Drain {
  private started: { signal: NodeJS.Signals; at: number } | undefined;
  private stop: (() => void) | undefined;

  constructor(
    private readonly logger: Logger,
    readonly graceMs: number,
  ) {}

  get draining(): boolean {
    return this.started !== undefined;
  }

  /** A readiness check: it fails from the moment the drain starts. */
  readonly check = (): string => {
    if (this.started) throw new Error(`draining since ${this.started.signal}, ${Date.now() - this.started.at} ms ago`);
    return 'not draining';
  };

  /**
   * Starts the drain on the first of `signals`; a second one ends the process at once, unless within
   * REPEAT_WINDOW_MS of the first (a supervisor signalling the process group, as systemd or npm do, sends it twice).
   */
  listen(signals: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT']): void {
    const on = (signal: NodeJS.Signals) => {
      if (this.started && Date.now() - this.started.at < REPEAT_WINDOW_MS)
        return this.logger.info(
          `drain: ${signal} again within ${REPEAT_WINDOW_MS} ms of the first: the same stop, still draining`,
        );
      if (this.started) {
        this.logger.warn(`drain: second ${signal}; exiting now, tasks still in flight are left to their timeouts`);
        process.exit(1);
      }
      this.started = { signal, at: Date.now() };
      this.logger.info(
        `drain: ${signal}; readiness is false, the pools stop polling, tasks in flight have ${this.graceMs} ms to finish`,
        { phase: 'signal', graceMs: this.graceMs },
      );
      this.stop?.();
    };
    for (const signal of signals) process.on(signal, on);
  }

  /** What stops the pools polling; called at once if the drain has already started. */
  stopWith(stop: () => void): void {
    this.stop = stop;
    if (this.started) stop();
  }

  /** Runs one phase of the stop, and logs how long it took (since the signal, if that came later) and since the signal. */
  async phase(name: string, fn: () => Promise<unknown> | unknown): Promise<void> {
    const called = Date.now();
    let failed = true;
    try {
      await fn();
      failed = false;
    } finally {
      const ms = Date.now() - Math.max(called, this.started?.at ?? 0);
      const sinceSignalMs = this.started ? Date.now() - this.started.at : undefined;
      const message = failed ? `drain: ${name}: failed after ${ms} ms` : `drain: ${name} in ${ms} ms`;
      this.logger[failed ? 'error' : 'info'](message, { phase: name, ms, sinceSignalMs, failed });
    }
  }
}
