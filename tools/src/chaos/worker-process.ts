// A worker as its own OS process, so that it can really die: SIGKILL leaves no chance to clean up,
// report a result or close a connection, as a crashed host would.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../../../src/config';

export interface WorkerProcess {
  pid: number;
  /** Everything it wrote, for a failure message. */
  output(): string;
  /** SIGKILL, and wait until it is gone. */
  kill(): Promise<void>;
  /** SIGTERM: a graceful shutdown (the drain); resolves once it is gone. */
  stop(): Promise<void>;
  /** How it ended: its exit code, or the signal that ended it. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `script` (the refund worker's source unless given; compiled JavaScript runs on plain Node,
 * without tsx) with `env` and resolves once it says it polls its task queue.
 */
export async function startWorkerProcess(
  env: NodeJS.ProcessEnv,
  timeoutMs = 60_000,
  script = path.join(PROJECT_ROOT, 'src', 'worker.ts'),
): Promise<WorkerProcess> {
  // WORKER_CPU_PROFILE_DIR: each worker writes V8 CPU profiles there (one per thread) when it stops (docs/bench/README.md).
  const profile = env.WORKER_CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${env.WORKER_CPU_PROFILE_DIR}`] : [];
  const loader = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child: ChildProcess = spawn(process.execPath, [...profile, ...loader, script], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (d: Buffer) => (output = (output + d.toString()).slice(-20_000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const signalled = (signal: NodeJS.Signals) => async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  for (
    const end = Date.now() + timeoutMs;
    !/worker polling task queue/.test(output);
    await new Promise((r) => setTimeout(r, 50))
  ) {
    if (child.exitCode !== null) throw new Error(`the worker exited (${child.exitCode}) before it polled:\n${output}`);
    if (Date.now() > end) {
      child.kill('SIGKILL');
      throw new Error(`the worker did not poll within ${timeoutMs} ms:\n${output}`);
    }
  }
  return { pid: child.pid!, output: () => output, kill: signalled('SIGKILL'), stop: signalled('SIGTERM'), exited };
}
