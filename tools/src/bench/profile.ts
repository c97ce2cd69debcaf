// npm run bench:profile -- <runs> <a.cpuprofile> [<b.cpuprofile>] [--bundle <a.js>] [--bundle <b.js>]: where a
// worker thread's time went, per run and as a share of its busy time, from the V8 CPU profiles that
// WORKER_CPU_PROFILE_DIR has each bench worker write (docs/bench/README.md); with two, side by side (say 1.0's
// project worker and today's, from benches of the same size). A profile counts a thread's time not idle, waits for
// a core included, so on a busy machine compare shares, not milliseconds. Frames of the workflow bundle are put
// under their module when the bundle is given (TEST_WORKFLOW_BUNDLE makes the bench load a bundle kept on disk).
import fs from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface Profile {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/** Each webpack module's first line in a bundle, ascending. */
function moduleStarts(bundle: string | undefined): [number, string][] {
  if (!bundle) return [];
  const starts: [number, string][] = [];
  fs.readFileSync(bundle, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      const m = /^\/\*{3}\/ "(.+)"/.exec(line);
      if (m) starts.push([i, m[1]!]);
    });
  return starts;
}

function bucketer(starts: [number, string][]) {
  const moduleAt = (line: number) => {
    let found = '(bundle runtime)';
    for (const [first, name] of starts) if (first <= line) found = name;
    return found;
  };
  const inBundle = (f: CallFrame) => starts.length > 0 && /workflows\.js$/.test(f.url);
  const place = (f: CallFrame): string => {
    if (!f.url) return f.functionName.startsWith('(') ? f.functionName : `native ${f.functionName}`;
    if (inBundle(f)) {
      const m = moduleAt(f.lineNumber);
      const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(m)?.[1];
      return `workflow ${pkg ?? m.replace(/^\.\/src\/([^/]+(?:\/[^/]+)?).*/, '$1').replace(/\.(ts|json)$/, '')}`;
    }
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(?:lib\/|dist\/)?([^/]+)?/.exec(f.url);
    if (pkg) return pkg[1] === '@temporalio/worker' ? `@temporalio/worker ${pkg[2]}` : pkg[1]!;
    const src = /\/(src|tools\/src)\/([^/]+(?:\/[^/.]+)?)/.exec(f.url);
    if (src) return `${src[1]} ${src[2]!.replace(/\.ts$/, '')}`;
    return f.url.startsWith('node:')
      ? `node ${
          f.url
            .slice(5)
            .replace(/^internal\//, '')
            .split('/')[0]
        }`
      : f.url;
  };
  // Costs a module's own frames do not show: each is named by what lies under it on the stack.
  return (stack: CallFrame[]): string => {
    if (stack.some((f) => /vm-shared/.test(f.url) && f.functionName === 'init'))
      return 'SDK: a stack trace per workflow promise';
    if (stack.some((f) => f.functionName === '__webpack_require__')) return 'workflow modules evaluated per run';
    if (stack[0]!.functionName === 'runInContext') return 'SDK: calls into the sandbox (each with its watchdog)';
    if (stack.some((f) => /better-sqlite3|sqlite-driver|pg\/lib/.test(f.url))) return 'store driver';
    return place(stack[0]!);
  };
}

/** Busy time (ms) and time per bucket, startup (bundling, loading) left out. */
function summarize(file: string, bundle: string | undefined): { busy: number; by: Map<string, number> } {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const bucket = bucketer(moduleStarts(bundle));
  const stacks = new Map<number, CallFrame[]>();
  const by = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    let stack = stacks.get(id);
    if (!stack) {
      stack = [];
      for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) stack.push(byId.get(n)!.callFrame);
      stacks.set(id, stack);
    }
    if (stack[0]!.functionName === '(idle)' || stack.some((f) => /bundler\.js|webpack\/|\/tsx\//.test(f.url))) return;
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    busy += ms;
    const key = bucket(stack);
    by.set(key, (by.get(key) ?? 0) + ms);
  });
  return { busy, by };
}

function main(argv: string[]): void {
  const bundles: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++)
    (argv[i] === '--bundle' ? bundles : rest).push(argv[argv[i] === '--bundle' ? ++i : i]!);
  const [runs, ...files] = [Number(rest[0]), ...rest.slice(1)];
  if (!(runs > 0) || files.length < 1 || files.length > 2) {
    console.error(
      'usage: npm run bench:profile -- <runs> <a.cpuprofile> [<b.cpuprofile>] [--bundle <a.js>] [--bundle <b.js>]',
    );
    process.exit(2);
  }
  const sums = files.map((f, i) => summarize(f, bundles[i]));
  const keys = [...new Set(sums.flatMap((s) => [...s.by.keys()]))];
  const share = (s: (typeof sums)[number], k: string) => (s.by.get(k) ?? 0) / s.busy;
  // Largest first; with two profiles, the largest difference of share first.
  keys.sort((x, y) =>
    sums.length === 2
      ? Math.abs(share(sums[1]!, y) - share(sums[0]!, y)) - Math.abs(share(sums[1]!, x) - share(sums[0]!, x))
      : share(sums[0]!, y) - share(sums[0]!, x),
  );
  const cell = (s: (typeof sums)[number], k: string) =>
    `${((s.by.get(k) ?? 0) / runs).toFixed(2).padStart(7)} ms ${(100 * share(s, k)).toFixed(1).padStart(5)}%`;
  console.log(files.map((f, i) => `${'AB'[i]}: ${f}, busy ${(sums[i]!.busy / runs).toFixed(1)} ms a run`).join('\n'));
  for (const k of keys.slice(0, 40)) {
    const diff =
      sums.length === 2 ? `  ${(100 * (share(sums[1]!, k) - share(sums[0]!, k))).toFixed(1).padStart(5)} pp` : '';
    console.log(`${sums.map((s) => cell(s, k)).join(' |')}${diff}  ${k}`);
  }
}

main(process.argv.slice(2));
