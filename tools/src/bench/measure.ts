// Small measurements the benchmark takes: a process's CPU time and peak memory from /proc, the
// percentiles of a sample, and a history's size as Temporal stores it.
import { temporal } from '@temporalio/proto';
import fs from 'node:fs';

/** Linux's USER_HZ: /proc reports CPU time in these ticks (100 on every Linux Node supports). */
const TICKS_PER_SECOND = 100;

/** A process's or thread's name and its user + system CPU time so far, from its /proc stat line. */
function statOf(stat: string): { name: string; cpuMs: number } {
  // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
    cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND,
  };
}

export interface ProcessSample {
  /** User + system CPU time so far. */
  cpuMs: number;
  /** Peak resident set size so far (VmHWM). */
  peakRssBytes: number;
  /** Resident set size now (VmRSS). */
  rssBytes: number;
}

/** The process's CPU time and peak RSS, or undefined once it is gone. */
export function sampleProcess(pid: number): ProcessSample | undefined {
  try {
    const { cpuMs } = statOf(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kB = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
    return { cpuMs, peakRssBytes: kB('VmHWM'), rssBytes: kB('VmRSS') };
  } catch {
    return undefined;
  }
}

/** Where a worker process spends CPU, by the name Linux gives each thread. */
export const THREAD_GROUPS = ['main', 'workflows', 'v8', 'core', 'other'] as const;
export type ThreadGroup = (typeof THREAD_GROUPS)[number];
export type ThreadCpu = Record<ThreadGroup, number>;

// Node's main thread; the SDK's workflow threads (worker_threads); V8's helpers (concurrent GC, the compiler); the
// Core SDK's Rust threads (gRPC, history and task state machines); the rest (libuv's pool: crypto, zlib, fs).
const GROUP_OF: [RegExp, ThreadGroup][] = [
  [/^(MainThread|node)$/, 'main'],
  [/^WorkerThread$/, 'workflows'],
  [/^V8Worker$/, 'v8'],
  [/^(tokio-runtime-w|workflow-proces)/, 'core'],
];

export const noThreadCpu = (): ThreadCpu => ({ main: 0, workflows: 0, v8: 0, core: 0, other: 0 });

/** The CPU time so far of each thread group of a process (threads that exited are in no group), or undefined once it is gone. */
export function threadCpu(pid: number): ThreadCpu | undefined {
  try {
    const by = noThreadCpu();
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        const { name, cpuMs } = statOf(fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
        by[GROUP_OF.find(([re]) => re.test(name))?.[1] ?? 'other'] += cpuMs;
      } catch {
        // the thread exited between the listing and the read
      }
    }
    return by;
  } catch {
    return undefined;
  }
}

/**
 * Watches a process until `stop`: the CPU time it used meanwhile and the most memory it held
 * (RSS polled every `everyMs`, so a process that exits still leaves what it reached just before).
 */
export function watchProcess(pid: number, everyMs = 50): { stop(): { cpuMs: number; maxRssBytes: number } } {
  const first = sampleProcess(pid);
  let last = first;
  let maxRssBytes = first?.rssBytes ?? 0;
  const take = () => {
    const s = sampleProcess(pid);
    if (!s) return;
    last = s;
    maxRssBytes = Math.max(maxRssBytes, s.rssBytes);
  };
  const timer = setInterval(take, everyMs);
  return {
    stop() {
      take();
      clearInterval(timer);
      return { cpuMs: (last?.cpuMs ?? 0) - (first?.cpuMs ?? 0), maxRssBytes };
    },
  };
}

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
}

/** Nearest-rank percentiles; zeros for an empty sample. */
export function percentiles(values: number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) =>
    sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : 0;
  return { p50: at(50), p95: at(95), p99: at(99) };
}

export const mean = (values: number[]) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0);

/** Events, and bytes as the history's protobuf encoding (what the server stores and sends). */
export function historySize(history: temporal.api.history.v1.IHistory): { events: number; bytes: number } {
  return {
    events: history.events?.length ?? 0,
    bytes: temporal.api.history.v1.History.encode(history).finish().byteLength,
  };
}
