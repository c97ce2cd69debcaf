// A circuit breaker per provider and operation class (stripe:create_refund, smtp:send): a provider that is down is
// not hammered by every run's retries, and runs learn it in a millisecond instead of a timeout. Per worker process, in
// memory (a new worker starts closed). It counts only health failures (unreachable, erroring, slow, rate limiting),
// never a business refusal or a bad request, and guards only new effects: reconciling reads never wait on it.
import type { FailureCode } from './taxonomy';
import type { BreakerSettings } from './policy';

export type BreakerState = 'closed' | 'open' | 'half_open';

/** The provider's health, not the request's merit: these count toward opening the breaker. */
export const HEALTH_FAILURES: ReadonlySet<FailureCode> = new Set([
  'TRANSIENT_DEPENDENCY',
  'RATE_LIMIT',
  'CAPACITY',
  'UNKNOWN_OUTCOME',
]);

export class CircuitBreaker {
  private state: BreakerState = 'closed';
  /** When each health failure and each success of the window happened (closed only; emptied when it opens or closes). */
  private failures: number[] = [];
  private successes: number[] = [];
  private openedAt: number | null = null;
  /** When each call now out was let through, and each probe among them: one never settled (its worker stuck) is given up after windowMs. */
  private out: number[] = [];
  private probes: number[] = [];
  private timesOpened = 0;

  constructor(
    readonly name: string,
    private readonly settings: BreakerSettings,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether a call may go out now; a refusal says why and for how long. A call let through must be settled with succeeded() or failed(). */
  admit() {
    if (!this.settings.enabled) return undefined;
    if (this.state === 'open') {
      const wait = this.openedAt! + this.settings.cooldownMs - this.now();
      if (wait > 0) return this.refusal(wait);
      this.state = 'half_open';
      this.probes = [];
    }
    const now = this.now();
    if (this.state === 'half_open') {
      this.probes = this.probes.filter((t) => now - t < this.settings.windowMs);
      // The others wait a cooldown, time for the probe to settle: asked again every second, a run refused while
      // the probe is out would spend its attempts in as many seconds and park.
      if (this.probes.length >= this.settings.halfOpenProbes) return this.refusal(this.settings.cooldownMs);
      this.probes.push(now);
    }
    this.recent(this.out, now).push(now);
    return undefined;
  }

  succeeded(): void {
    this.settle();
    if (this.state !== 'closed') return this.enter('closed');
    const now = this.now();
    this.recent(this.successes, now).push(now);
  }

  /** A call let through that never reached the provider (its answer was already known, or it was refused before sending): no verdict. */
  abstained(): void {
    this.settle();
    if (this.state === 'half_open') this.probes.shift();
  }

  /** A call that failed: only a health failure from the provider counts; any other is no verdict. */
  failed(code: FailureCode, fromProvider: boolean): void {
    if (!fromProvider || !HEALTH_FAILURES.has(code)) return this.abstained();
    this.settle();
    if (this.state === 'half_open') {
      this.probes.shift();
      return this.enter('open');
    }
    if (this.state !== 'closed') return;
    const now = this.now();
    this.recent(this.failures, now).push(now);
    this.recent(this.successes, now);
    // Open once the failures are enough, and at least half of the window's calls, counting those still out: a burst
    // of concurrent calls whose first answers are fast failures (a 429, a reset) waits for the rest. Opened on five
    // failures in a row, it refused the forty-five of fifty that were about to succeed; a success that reset the
    // count, on the other hand, kept it closed through a partial outage that failed nine calls in ten.
    const failed = this.failures.length;
    if (failed >= this.settings.failureThreshold && failed >= this.successes.length + this.out.length)
      this.enter('open');
  }

  /** Its state, and the window's health failures, successes and calls still out. */
  snapshot() {
    const now = this.now();
    const count = (times: number[]) => this.recent(times, now).length;
    return {
      name: this.name,
      state: this.state,
      failures: count(this.failures),
      successes: count(this.successes),
      inFlight: count(this.out),
      openedAt: this.openedAt,
      opened: this.timesOpened,
    };
  }

  /** One call's verdict is in; calls out longer than the window (their worker stuck) are given up. */
  private settle(): void {
    this.recent(this.out, this.now()).shift();
  }

  /** Drops the times older than the window (each list is in the order it was written), and returns the list. */
  private recent(times: number[], now: number): number[] {
    while (times.length > 0 && now - times[0]! >= this.settings.windowMs) times.shift();
    return times;
  }

  /** Opens or closes it: the window's counts start afresh. */
  private enter(state: 'open' | 'closed'): void {
    this.state = state;
    this.openedAt = state === 'open' ? this.now() : null;
    this.failures = [];
    this.successes = [];
    if (state === 'open') this.timesOpened++;
  }

  /** `retryAfterMs`: how long until it lets a probe through; the caller's retry should wait at least this. */
  private refusal(retryAfterMs: number) {
    const what =
      this.state === 'open'
        ? `open since ${new Date(this.openedAt!).toISOString()}, after ${this.settings.failureThreshold} or more health failures that were at least half of its calls`
        : 'half-open, its probe already out';
    return {
      state: this.state,
      retryAfterMs,
      message: `circuit breaker ${this.name} is ${what}; nothing was sent (next probe in ${retryAfterMs} ms)`,
    };
  }
}

/** The worker's breakers, one per provider and operation class, made on first use. */
export class Breakers {
  private readonly byName = new Map<string, CircuitBreaker>();

  constructor(
    private readonly settings: BreakerSettings,
    private readonly now: () => number = Date.now,
  ) {}

  get(name: string): CircuitBreaker {
    let b = this.byName.get(name);
    if (!b) this.byName.set(name, (b = new CircuitBreaker(name, this.settings, this.now)));
    return b;
  }
}
