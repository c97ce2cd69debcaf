// Time for the model of the operation protocol: one true clock that only the model moves, the hosts'
// wall clocks as that clock plus each host's skew, and timers (setTimeout) that fire in true time.
// While installed, Date and setTimeout are these: the real code under test (the transport's timer,
// its send deadline, the attempt's start, the store's stamps) reads them as it would read the host's.
import { AsyncLocalStorage } from 'node:async_hooks';

interface Timer {
  id: number;
  at: number;
  fn: (...args: unknown[]) => void;
  args: unknown[];
}

/** The host whose wall clock the code running here reads (a worker, or the store's database server). */
const hostHere = new AsyncLocalStorage<string>();

const RealDate = Date;
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

export class VirtualTime {
  /** True time, in ms since the epoch: what the provider and Temporal's timers go by. */
  now: number;
  private readonly skews = new Map<string, number>();
  private timers: Timer[] = [];
  private nextId = 1;
  /** Counts every timer set, so the model can tell when the code under test stopped moving. */
  activity = 0;

  constructor(start: number) {
    this.now = start;
  }

  setSkew(host: string, ms: number): void {
    this.skews.set(host, ms);
  }

  skew(host: string): number {
    return this.skews.get(host) ?? 0;
  }

  /** The wall clock of the host the calling code runs on (true time outside any host). */
  wallNow(): number {
    const host = hostHere.getStore();
    return this.now + (host === undefined ? 0 : this.skew(host));
  }

  onHost<T>(host: string, fn: () => T): T {
    return hostHere.run(host, fn);
  }

  setTimer(fn: (...args: unknown[]) => void, ms: number, args: unknown[] = []): number {
    const id = this.nextId++;
    this.timers.push({ id, at: this.now + Math.max(0, ms), fn, args });
    this.activity += 1;
    return id;
  }

  /** When the timers set now will fire. */
  dueTimes(): number[] {
    return this.timers.map((t) => t.at);
  }

  clearTimer(id: number): void {
    this.timers = this.timers.filter((t) => t.id !== id);
  }

  /** Moves true time on by `ms`, firing each timer due on the way at its time, `settle` after each. */
  async advance(ms: number, settle: () => Promise<void>): Promise<void> {
    const until = this.now + ms;
    await this.fireDue(until, settle);
    this.now = until;
  }

  /** Fires timers due by now (a setTimeout(fn, 0) waits for this, as it waits for the event loop). */
  async fireDue(until: number, settle: () => Promise<void>): Promise<void> {
    for (;;) {
      const due = this.timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) return;
      this.clearTimer(due.id);
      this.now = Math.max(this.now, due.at);
      due.fn(...due.args);
      await settle();
    }
  }

  /** Replaces Date and setTimeout/clearTimeout with this clock's until `uninstall`. */
  install(): void {
    const wallNow = () => this.wallNow();
    class ModelDate extends RealDate {
      constructor(...args: unknown[]) {
        if (args.length === 0) super(wallNow());
        else super(...(args as [string | number]));
      }
      static override now(): number {
        return wallNow();
      }
    }
    globalThis.Date = ModelDate as DateConstructor;
    globalThis.setTimeout = Object.assign(
      (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) =>
        new ModelTimeout(this, this.setTimer(fn, ms ?? 0, args)),
      { __promisify__: realSetTimeout.__promisify__ },
    ) as unknown as typeof setTimeout;
    globalThis.clearTimeout = ((t: ModelTimeout | undefined) => {
      if (t instanceof ModelTimeout) this.clearTimer(t.id);
    }) as typeof clearTimeout;
  }

  uninstall(): void {
    globalThis.Date = RealDate;
    globalThis.setTimeout = realSetTimeout;
    globalThis.clearTimeout = realClearTimeout;
  }
}

/** What setTimeout returns in Node, as far as the code under test uses it. */
class ModelTimeout {
  constructor(
    private readonly time: VirtualTime,
    readonly id: number,
  ) {}
  unref(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  hasRef(): boolean {
    return true;
  }
  [Symbol.toPrimitive](): number {
    return this.id;
  }
  close(): this {
    this.time.clearTimer(this.id);
    return this;
  }
}
