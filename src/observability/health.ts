// The worker's answers to an orchestrator's probes: GET /healthz, the process is alive (its event
// loop answers); GET /readyz, it should be given work: every readiness check passes. Each answer is
// JSON naming every check and what it saw, so a failed probe says which check failed and why.
import http from 'node:http';
import type { Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { Payload } from '@temporalio/common';
import { EncryptionCodec } from '../codec/encryption-codec';
import type { Keyring } from '../codec/keyring';
import { urlHost } from '../config';
import { listen, sendJson } from '../http/server';

/** Resolves with what it saw, or throws saying what is wrong. */
type ReadinessCheck = () => unknown;

/** A check that has not answered in this long has failed: a probe must not hang on a stuck database. */
const CHECK_TIMEOUT_MS = 2000;

type Outcome = { ok: true; saw?: unknown } | { ok: false; error: string };

async function judge(check: ReadinessCheck): Promise<Outcome> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    const saw = await Promise.race([Promise.resolve().then(check), late]);
    return saw === undefined ? { ok: true } : { ok: true, saw };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

async function readiness(checks: Record<string, ReadinessCheck>) {
  const judged = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => [name, await judge(check)] as const),
  );
  const failed = judged.filter(([, outcome]) => !outcome.ok).map(([name]) => name);
  return { ready: failed.length === 0, failed, checks: Object.fromEntries(judged) };
}

export async function startHealthServer(checks: Record<string, ReadinessCheck>, at: { host: string; port: number }) {
  const server = http.createServer((req, res) => {
    const answer = (status: number, body: Record<string, unknown>) =>
      sendJson(res, status, body, { 'Cache-Control': 'no-store' });
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(405, { error: `${req.method} is not allowed` });
    if (path === '/healthz') return answer(200, { alive: true, pid: process.pid });
    if (path !== '/readyz') return answer(404, { error: 'no such path; probes are GET /healthz and GET /readyz' });
    // Never rejects: judge turns each check's failure or silence into its outcome.
    void readiness(checks).then((r) => answer(r.ready ? 200 : 503, r));
  });
  // Probes are short: an idle kept-alive socket must not hold the drain's close open.
  server.keepAliveTimeout = 1000;
  const port = await listen(server, at.port, at.host);
  return {
    url: `http://${urlHost(at.host)}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

/** A probe's call to Temporal ends by then: a client call retries an unreachable server for long, and probes come every few seconds. */
const TEMPORAL_CHECK_MS = 1500;
/** grpc.health.v1.HealthCheckResponse.ServingStatus.SERVING */
const SERVING = 1;

/**
 * What makes a worker process ready: not draining, Temporal's frontend serving, every pool polling,
 * the store answering, the codec able to encrypt. The pools' pollers alone do not say the server is
 * reachable: the SDK's core retries a failed poll and the poller stays POLLING meanwhile.
 */
export function workerReadiness(parts: {
  draining: ReadinessCheck;
  temporal: Pick<Connection, 'healthService' | 'withDeadline'>;
  workers: () => readonly Worker[];
  store: { ping(): Promise<void> };
  keyring: Keyring | undefined;
}): Record<string, ReadinessCheck> {
  return {
    draining: parts.draining,
    temporal: async () => {
      const { status } = await parts.temporal.withDeadline(Date.now() + TEMPORAL_CHECK_MS, () =>
        parts.temporal.healthService.check({}),
      );
      if (status !== SERVING) throw new Error(`the Temporal frontend answers status ${status ?? 'none'}, not SERVING`);
      return 'frontend serving';
    },
    pools: () => poolsPolling(parts.workers()),
    store: () => parts.store.ping(),
    codec: () => codecWorks(parts.keyring),
  };
}

/**
 * Every pool polls: each of the process's Temporal workers runs, and none of its pollers has failed
 * or stopped (a pool that runs no workflow code never polls for workflow tasks: that one is expected).
 */
function poolsPolling(workers: readonly Worker[]): string[] {
  if (workers.length === 0) throw new Error('the pools are not created yet');
  const stopped = workers.flatMap((w) => {
    const s = w.getStatus();
    const runsWorkflows = Boolean(w.options.workflowBundle ?? w.options.workflowsPath);
    const polling =
      s.runState === 'RUNNING' &&
      s.activityPollerState === 'POLLING' &&
      (!runsWorkflows || s.workflowPollerState === 'POLLING');
    const workflowPoller = runsWorkflows ? `, workflow poller ${s.workflowPollerState}` : '';
    return polling
      ? []
      : [`${w.options.taskQueue} (${s.runState}, activity poller ${s.activityPollerState}${workflowPoller})`];
  });
  if (stopped.length > 0) throw new Error(`not polling: ${stopped.join('; ')}`);
  return workers.map((w) => w.options.taskQueue);
}

// Long enough to be deflated too.
const PROBE: Payload = {
  metadata: { encoding: new TextEncoder().encode('binary/plain') },
  data: new Uint8Array(64).fill(42),
};

/** The codec has its keys: a payload sealed with the current key opens again. No keyring: plaintext, as configured. */
async function codecWorks(keyring: Keyring | undefined): Promise<string> {
  if (!keyring) return 'plaintext (PAYLOAD_ENCRYPTION=off)';
  const codec = new EncryptionCodec(keyring);
  const [back] = await codec.decode(await codec.encode([PROBE]));
  if (!back?.data || Buffer.compare(Buffer.from(back.data), Buffer.from(PROBE.data!)) !== 0)
    throw new Error(`a payload encrypted with key ${keyring.current} does not decrypt`);
  return `encrypts with key ${keyring.current}`;
}
