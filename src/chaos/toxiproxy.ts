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
  close(): Promise<void>;
}


export async function startToxiproxy(): Promise<Toxiproxy> {
  const port = await freePort();
  const child: ChildProcess = spawn(findTool('toxiproxy-server'), ['-host', '127.0.0.1', '-port', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const apiUrl = `http://127.0.0.1:${port}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${apiUrl}${path}`, { method, ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) });
    const text = await res.text();
    if (!res.ok) throw new Error(`toxiproxy ${method} ${path}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  };
  for (const end = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 50))) {
    if (child.exitCode !== null) throw new Error(`toxiproxy-server exited (${child.exitCode}): ${stderr}`);
    if (await fetch(`${apiUrl}/version`).then((r) => r.ok, () => false)) break;
    if (Date.now() > end) throw new Error(`toxiproxy-server did not answer on ${apiUrl}: ${stderr}`);
  }
  return {
    apiUrl,
    async proxy(name, upstream) {
      const created = await call('POST', '/proxies', { name, listen: '127.0.0.1:0', upstream, enabled: true });
      return { name, listen: String(created.listen), upstream };
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
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
