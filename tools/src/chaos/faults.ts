// Random faults for a chaos run, drawn from a seeded generator so that a run can be repeated:
// Toxiproxy toxics and dependencies down for a moment, and the servers' own semantic faults.
import type { ChaosStack } from './chaos-stack';
import type { Toxic } from './toxiproxy';

/** mulberry32: a small, good-enough seeded generator; [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Fault = {
  name: string;
  inject(stack: ChaosStack, random: () => number, id: string): Promise<() => Promise<void>>;
};

const between = (random: () => number, lo: number, hi: number) => Math.round(lo + random() * (hi - lo));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const toxic =
  (
    proxy: 'stripe' | 'smtp' | 'temporal',
    make: (random: () => number) => Omit<Toxic, 'name'>,
    holdMs: [number, number],
  ): Fault['inject'] =>
  async (stack, random, id) => {
    await stack.toxiproxy.addToxic(proxy, { name: id, ...make(random) });
    const hold = between(random, ...holdMs);
    return async () => {
      await sleep(hold);
      await stack.toxiproxy.removeToxic(proxy, id).catch(() => undefined);
    };
  };

const down =
  (proxy: 'stripe' | 'smtp' | 'temporal', holdMs: [number, number]): Fault['inject'] =>
  async (stack, random) => {
    await stack.toxiproxy.setEnabled(proxy, false);
    const hold = between(random, ...holdMs);
    return async () => {
      await sleep(hold);
      await stack.toxiproxy.setEnabled(proxy, true);
    };
  };

const post = async (url: string, body: unknown) => {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
};
const semantic =
  (target: 'stripe' | 'mail', body: (random: () => number) => Record<string, unknown>): Fault['inject'] =>
  async (stack, random) => {
    await post(target === 'stripe' ? `${stack.stripeUrl}/_faults` : `${stack.mail.apiUrl}/_faults`, body(random));
    return async () => undefined;
  };

/** What a chaos run may inject; each draw picks one at random. */
export const FAULTS: Fault[] = [
  {
    name: 'stripe: lost answer (reset_peer)',
    inject: toxic(
      'stripe',
      () => ({ type: 'reset_peer', stream: 'downstream', attributes: { timeout: 0 } }),
      [200, 1200],
    ),
  },
  {
    name: 'stripe: stalled answer (timeout)',
    inject: toxic('stripe', () => ({ type: 'timeout', stream: 'downstream', attributes: { timeout: 0 } }), [300, 1500]),
  },
  {
    name: 'stripe: cut answer (limit_data)',
    inject: toxic(
      'stripe',
      () => ({ type: 'limit_data', stream: 'downstream', attributes: { bytes: 64 } }),
      [200, 1000],
    ),
  },
  {
    name: 'stripe: latency',
    inject: toxic(
      'stripe',
      (r) => ({ type: 'latency', stream: 'downstream', attributes: { latency: between(r, 100, 800), jitter: 200 } }),
      [1000, 3000],
    ),
  },
  { name: 'stripe: down', inject: down('stripe', [300, 2000]) },
  { name: 'smtp: down', inject: down('smtp', [300, 2000]) },
  {
    name: 'smtp: latency',
    inject: toxic(
      'smtp',
      (r) => ({ type: 'latency', stream: 'downstream', attributes: { latency: between(r, 100, 600), jitter: 100 } }),
      [1000, 3000],
    ),
  },
  { name: 'temporal: frontend down', inject: down('temporal', [500, 3000]) },
  // Scoped to the refunds API (create and list), so that the run's own seeding of orders is not hit.
  {
    name: 'stripe: 500',
    inject: semantic('stripe', () => ({ kind: 'server_error', status: 500, match: { path: '/v1/refunds' }, count: 1 })),
  },
  {
    name: 'stripe: 429',
    inject: semantic('stripe', () => ({
      kind: 'rate_limit',
      retryAfterSeconds: 1,
      match: { path: '/v1/refunds' },
      count: 1,
    })),
  },
  {
    name: 'stripe: lost answer after commit',
    inject: semantic('stripe', () => ({
      kind: 'drop_after_commit',
      match: { method: 'POST', path: '/v1/refunds' },
      count: 1,
    })),
  },
  {
    name: 'stripe: lagging list',
    inject: semantic('stripe', () => ({ kind: 'lagging_list', lagMs: 1500, match: { path: '/v1/refunds' }, count: 1 })),
  },
  {
    name: 'workers: killed right after Stripe made a refund',
    inject: async (stack) => {
      stack.killAfterNextRefund();
      return async () => undefined;
    },
  },
  {
    // The message is stored and its 250 never sent: the hand-over's outcome is unknown until the message log says.
    name: 'smtp: lost answer after accept',
    inject: semantic('mail', () => ({ kind: 'drop_after_accept', count: 1 })),
  },
  {
    name: 'smtp: 451 at rcpt',
    inject: semantic('mail', () => ({
      kind: 'reply',
      stage: 'rcpt',
      code: 451,
      message: '4.3.0 try again (chaos)',
      count: 1,
    })),
  },
];

/** Injects a random fault every `everyMs` with probability `rate`, until stopped; counts what it injected. */
export function startFaultInjector(stack: ChaosStack, opts: { rate: number; everyMs: number; random: () => number }) {
  const injected: Record<string, number> = {};
  const lifting = new Set<Promise<void>>();
  let n = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await sleep(opts.everyMs);
      if (stopped || opts.random() >= opts.rate) continue;
      const fault = FAULTS[Math.floor(opts.random() * FAULTS.length)]!;
      try {
        const lift = await fault.inject(stack, opts.random, `chaos-${++n}`);
        injected[fault.name] = (injected[fault.name] ?? 0) + 1;
        const p = lift()
          .catch(() => undefined)
          .finally(() => lifting.delete(p));
        lifting.add(p);
      } catch {
        // A fault that could not be armed is simply not counted.
      }
    }
  })();
  return {
    injected,
    /** Stops injecting, waits for held faults to lift, and clears what is left. */
    async stop(): Promise<void> {
      stopped = true;
      await loop;
      await Promise.all(lifting);
      await stack.toxiproxy.reset();
      await fetch(`${stack.stripeUrl}/_faults`, { method: 'DELETE' }).catch(() => undefined);
      await fetch(`${stack.mail.apiUrl}/_faults`, { method: 'DELETE' }).catch(() => undefined);
    },
  };
}
