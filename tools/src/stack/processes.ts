// Background processes the stack starts, tracked by pid files under DATA_DIR/run so that
// `npm run stop` stops exactly what we started and nothing else.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pidFile, runDir, runningPid } from '../../../src/local-stack';

export { runningPid };

export interface ProcessSpec {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
}

export const logFile = (dataDir: string, name: string) => path.join(dataDir, 'logs', `${name}.log`);

export function startDetached(dataDir: string, spec: ProcessSpec): number {
  fs.mkdirSync(runDir(dataDir), { recursive: true });
  fs.mkdirSync(path.dirname(logFile(dataDir, spec.name)), { recursive: true });
  const log = fs.openSync(logFile(dataDir, spec.name), 'a');
  const child = spawn(spec.command, spec.args, {
    detached: true,
    stdio: ['ignore', log, log],
    env: { ...process.env, ...spec.env },
  });
  fs.closeSync(log);
  // A failed spawn also emits 'error'; without a listener that would crash us before we report it.
  child.once('error', () => undefined);
  if (child.pid === undefined) throw new Error(`could not start ${spec.name} (${spec.command})`);
  child.unref();
  const marker = spec.args.at(-1) ?? spec.command;
  fs.writeFileSync(pidFile(dataDir, spec.name), JSON.stringify({ pid: child.pid, command: marker }));
  return child.pid;
}

/**
 * Records this process under `name`, for a process started in the foreground (`npm run dev`'s
 * worker): `npm run stop` then stops it too, and `npm run demo` sees a worker already running.
 */
export function registerSelf(dataDir: string, name: string, marker: string): () => void {
  fs.mkdirSync(runDir(dataDir), { recursive: true });
  fs.writeFileSync(pidFile(dataDir, name), JSON.stringify({ pid: process.pid, command: marker }));
  return () => {
    if (runningPid(dataDir, name) === process.pid) fs.rmSync(pidFile(dataDir, name), { force: true });
  };
}

/** Stops a process we started (its whole process group, or itself when it leads none), waiting for it to exit. */
export async function stopProcess(dataDir: string, name: string): Promise<boolean> {
  const pid = runningPid(dataDir, name);
  fs.rmSync(pidFile(dataDir, name), { force: true });
  if (pid === undefined) return false;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-pid, sig);
    } catch {
      // A foreground process (npm run dev's worker) leads no group of its own.
      try {
        process.kill(pid, sig);
      } catch {
        // already gone
      }
    }
  };
  signal('SIGTERM');
  for (let i = 0; i < 100; i++) {
    if (!isAlive(pid)) return true;
    await sleep(100);
  }
  signal('SIGKILL');
  return true;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A port nothing listens on right now, on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export function portOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(1000);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  log?: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(250);
  }
  throw new Error(`${what} did not become ready within ${timeoutMs / 1000}s${log ? `; see ${log}` : ''}`);
}
