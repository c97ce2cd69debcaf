// Toxiproxy, the fault-injecting TCP proxy, as the chaos stack uses it: one server process on
// loopback, a proxy in front of each dependency, and toxics added and removed through its HTTP API.
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../stack/processes';
import { findTool } from '../stack/tools';

/** The toxics we use (https://github.com/Shopify/toxiproxy#toxics); `attributes` as Toxiproxy names them. */
export type ToxicType = 'latency' | 'timeout' | 'reset_peer' | 'limit_data' | 'bandwidth' | 'slow_close';

export interface Toxic {
  name: string;
  type: ToxicType;
  /** downstream: the dependency's answers to us; upstream: our requests to it. */
  stream: 'upstream' | 'downstream';
  /** The share of connections it applies to, 0-1. */
  toxicity?: number;
  attributes: Record<string, number>;
}

export interface Proxy {
  name: string;
  /** Where clients connect: host:port on loopback. */
  listen: string;
  upstream: string;
}

/** An exit of the server we did not ask for, and what it said last. */
export interface ToxiproxyCrash {
  at: string;
  code: number | null;
  signal: string | null;
  stderr: string;
}

export interface Toxiproxy {
  apiUrl: string;
  /** A proxy on a free loopback port in front of `upstream` (host:port). */
  proxy(name: string, upstream: string): Promise<Proxy>;
  addToxic(proxy: string, toxic: Toxic): Promise<void>;
  removeToxic(proxy: string, toxic: string): Promise<void>;
  /** A disabled proxy refuses connections and cuts the open ones: the dependency is down. */
  setEnabled(proxy: string, enabled: boolean): Promise<void>;
  /** Every proxy enabled, every toxic removed. */
  reset(): Promise<void>;
  /** Times the server exited on its own; each time it was started again with the same proxies on the same ports. */
  readonly crashes: readonly ToxiproxyCrash[];
  /** The server process now running. */
  readonly pid: number | undefined;
  close(): Promise<void>;
}

/**
 * Starts toxiproxy-server on loopback. Should it exit on its own (a crash would otherwise leave
 * every proxied dependency unreachable for the rest of a chaos run, and every fault unarmed), it
 * is started again on the same API port, its proxies recreated on the same listen ports, and the
 * crash recorded with the server's last words.
 */
export async function startToxiproxy(): Promise<Toxiproxy> {
  const port = await freePort();
  const apiUrl = `http://127.0.0.1:${port}`;
  const proxies = new Map<string, Proxy>();
  const crashes: ToxiproxyCrash[] = [];
  let closing = false;
  let child: ChildProcess;
  let restarting: Promise<void> | undefined;

  const request = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${apiUrl}${path}`, {
      method,
      ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`toxiproxy ${method} ${path}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  };

  const launch = async (): Promise<void> => {
    let stderr = '';
    child = spawn(findTool('toxiproxy-server'), ['-host', '127.0.0.1', '-port', String(port)], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const started = child;
    started.once('exit', (code, signal) => {
      if (closing) return;
      crashes.push({ at: new Date().toISOString(), code, signal, stderr: stderr.slice(-2000) });
      restarting = relaunch().finally(() => (restarting = undefined));
    });
    for (const end = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 50))) {
      if (started.exitCode !== null) throw new Error(`toxiproxy-server exited (${started.exitCode}): ${stderr}`);
      if (
        await fetch(`${apiUrl}/version`).then(
          (r) => r.ok,
          () => false,
        )
      )
        return;
      if (Date.now() > end) throw new Error(`toxiproxy-server did not answer on ${apiUrl}: ${stderr}`);
    }
  };

  const relaunch = async (): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await launch();
        for (const p of proxies.values())
          await request('POST', '/proxies', { name: p.name, listen: p.listen, upstream: p.upstream, enabled: true });
        return;
      } catch (err) {
        if (closing || attempt >= 5) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  };

  /** A call made while the server is being started again waits for it. */
  const call = async (method: string, path: string, body?: unknown) => {
    if (restarting) await restarting;
    return request(method, path, body);
  };

  await launch();
  return {
    apiUrl,
    crashes,
    get pid() {
      return child.pid;
    },
    async proxy(name, upstream) {
      const created = await call('POST', '/proxies', { name, listen: '127.0.0.1:0', upstream, enabled: true });
      const proxy = { name, listen: String(created.listen), upstream };
      proxies.set(name, proxy);
      return proxy;
    },
    async addToxic(proxy, toxic) {
      await call('POST', `/proxies/${proxy}/toxics`, { toxicity: 1, ...toxic });
    },
    async removeToxic(proxy, toxic) {
      await call('DELETE', `/proxies/${proxy}/toxics/${toxic}`);
    },
    async setEnabled(proxy, enabled) {
      await call('POST', `/proxies/${proxy}`, { enabled });
    },
    async reset() {
      await call('POST', '/reset');
    },
    async close() {
      closing = true;
      await restarting?.catch(() => undefined);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
