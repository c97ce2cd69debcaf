// The benchmark's report as Markdown: the figures per variant, the ratios against the targets,
// and how costs grow with the work.
import type { BenchReport, Over } from './run';
import { machineCpuMsPerRun, variantName, type CellResult } from './matrix';
import type { CheckoutCell } from './checkouts';
import { THREAD_GROUPS, type ThreadGroup } from './measure';

/** The fewest events a run of n sequential activities can leave (derived in docs/bench/README.md). */
export const minimumEvents = (activities: number) => 5 + 6 * activities;
/** The bare shape: refund, order update, notification. */
export const BARE_SHAPE_MIN_EVENTS = minimumEvents(3);

/** Temporal's default limit on a workflow's history events (the server terminates a run past it). */
export const HISTORY_EVENT_LIMIT = 51_200;

/** What the safety may cost against bare, without faults (issue 36); p50 and memory are held at 10 and 50 in flight. */
export const TARGETS = {
  throughput: 0.8,
  p50: 1.3,
  atOne: { throughput: 0.95 },
  workerCpu: 1.5,
  machineCpu: 1.25,
  bytesOverBare: 2,
  eventsOverBareMinimum: 1.1,
  statementsPerRun: 30,
  commitsPerRun: 6,
  peakRssOverBare: 1.3,
} as const;

const f = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
const mb = (bytes: number) => `${Math.round(bytes / 2 ** 20)} MiB`;
const ms = (n: number) => `${Math.round(n)} ms`;
const row = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
const table = (head: string[], rows: (string | number)[][]) =>
  [row(head), row(head.map(() => '---')), ...rows.map(row)].join('\n');

function cellRows(cells: CellResult[]): (string | number)[][] {
  return cells.map((c) => [
    variantName(c.variant),
    c.concurrency,
    `${c.completed}/${c.runs}`,
    f(c.throughput, 2),
    `${ms(c.latencyMs.p50)} / ${ms(c.latencyMs.p95)} / ${ms(c.latencyMs.p99)}`,
    `${f(c.history.eventsPerRun)} (max ${c.history.maxEvents})`,
    Math.round(c.history.bytesPerRun),
    f(c.requests.effectRequestsPerEffect, 2),
    f(c.requests.allRequestsPerEffect, 2),
    `${c.duplicates.refunds} / ${c.duplicates.emails}`,
    c.wrongOrders,
    f(c.worker.cpuMsPerRun),
    mb(c.worker.peakRssBytes),
    `${f(c.store.statementsPerRun)} / ${f(c.store.commitsPerRun)}`,
    `${f(c.stackCpuMsPerRun.temporal)} / ${f(c.stackCpuMsPerRun.toxiproxy)} / ${f(c.stackCpuMsPerRun.benchProcess)}`,
    f(machineCpuMsPerRun(c)),
  ]);
}

const CELL_HEAD = [
  'variant',
  'conc.',
  'completed',
  'runs/s',
  'p50 / p95 / p99',
  'events/run',
  'bytes/run',
  'effect req./effect',
  'all req./effect',
  'dup. refunds / emails',
  'wrong orders',
  'worker CPU ms/run',
  'worker peak RSS',
  'store statements / commits per run',
  'Temporal / proxy / bench process CPU ms/run',
  'all CPU ms/run',
];

/** Each worker's CPU per run by thread, and the project's excess over bare in each: where the worker's cost lies. */
function threadSection(cells: CellResult[]): string[] {
  const bare = (c: CellResult) => cells.find((b) => b.variant === 'bare' && b.concurrency === c.concurrency);
  const rows = cells.map((c) => {
    const t = c.worker.threadsMsPerRun;
    const b = c.variant === 'project' ? bare(c)?.worker.threadsMsPerRun : undefined;
    const cell = (g: ThreadGroup) => (b ? `${f(t[g])} (${t[g] >= b[g] ? '+' : ''}${f(t[g] - b[g])})` : f(t[g]));
    return [variantName(c.variant), c.concurrency, ...THREAD_GROUPS.map(cell), f(c.worker.cpuMsPerRun)];
  });
  return [
    "Where each worker's CPU goes, ms a run by thread (Linux's per-thread counters): Node's main thread (activities, the codec, the store, the SDK's bridge), the SDK's workflow threads (the sandbox), V8's helpers (concurrent GC, the compiler), the Core SDK's Rust threads (gRPC, the task state machines), and the rest (libuv's pool, exited threads); the project's excess over bare in brackets.",
    '',
    table(['variant', 'conc.', 'main', 'workflow threads', 'V8 helpers', 'Core', 'other', 'worker CPU'], rows),
    '',
  ];
}

export function renderReport(r: BenchReport): string {
  const out: string[] = [];
  const { machine, versions } = r;
  out.push('# Benchmark: what the safety costs, and what it buys');
  out.push('');
  out.push(`- Command: \`${r.command}\``);
  out.push(`- Date: ${r.date}; took ${Math.round(r.durationMs / 1000)} s`);
  const { matrix: m, scale: sc } = r.options;
  out.push(
    `- Sizes: concurrency ${m.concurrency.join(', ')}; ${m.runs} runs per variant and turn at concurrency 1 (at c: at least 4c), without faults in ${m.rounds} turn(s) each starting with the next variant, with faults in one; faults: ${m.faultModes.join(' and ')}; replay ${sc.replay.join(', ') || 'none'}; parked ${sc.parked.join(', ') || 'none'} (sweep asks up to ${sc.sweepMaxRuns}); long wait ${sc.longWaitMs / 1000} s`,
  );
  out.push(`- Machine: ${machine.cpus} cores (${machine.cpuModel}), ${machine.memoryGiB} GiB, ${machine.platform}`);
  out.push(
    `- Versions: ${Object.entries(versions)
      .map(([k, v]) => `${k} ${v.replace(/\n/g, '; ')}`)
      .join(', ')}`,
  );
  out.push(
    `- Variants: **bare** (Temporal alone: three plain activities), **bare+platform** (bare with the platform features the project uses), **project** (the refund workflow as shipped), **naive** (retry the whole run, no keys)${r.baseline ? `, **baseline** (${r.baseline}'s refund workflow)` : ''}. What each is, how it is counted and the minimum history: [README.md](README.md).`,
  );
  out.push('');
  for (const mode of ['none', 'faults'] as const) {
    const cells = r.cells.filter((c) => c.faults === mode);
    if (!cells.length) continue;
    out.push(mode === 'none' ? '## No faults' : '## With faults');
    out.push('');
    if (mode === 'faults') {
      out.push(
        'Each segment gets the same schedule, sized to its runs: lost answers after commit (10%), 429s with Retry-After (5%), connection resets before commit (5%), SMTP 451s (5%), and its worker SIGKILLed halfway. What fired, as the servers counted it:',
      );
      out.push('');
      out.push(
        table(
          [
            'variant',
            'conc.',
            'lost answers',
            '429s',
            'resets',
            'SMTP 451s',
            'worker kills',
            'bound: 1 + faults/effect',
          ],
          cells.map((c) => {
            const transient =
              c.injected.lostAnswers + c.injected.rateLimits + c.injected.resets + c.injected.smtpTransient;
            return [
              variantName(c.variant),
              c.concurrency,
              c.injected.lostAnswers,
              c.injected.rateLimits,
              c.injected.resets,
              c.injected.smtpTransient,
              c.injected.workerKills,
              f(1 + transient / (2 * c.runs), 2),
            ];
          }),
        ),
      );
      out.push('');
    }
    out.push(table(CELL_HEAD, cellRows(cells)));
    out.push('');
    if (mode === 'none') out.push(...threadSection(cells));
    const others = cells.filter((c) => Object.keys(c.other).length);
    if (others.length) {
      out.push(
        'Runs that did not complete: ' +
          others
            .map(
              (c) =>
                `${variantName(c.variant)} at ${c.concurrency}: ${Object.entries(c.other)
                  .map(([k, n]) => `${n} ${k}`)
                  .join(', ')}`,
            )
            .join('; ') +
          '.',
      );
      out.push('');
    }
  }
  out.push('## Project against bare');
  out.push('');
  out.push(
    `Targets without faults: throughput at least ${TARGETS.throughput}× and p50 at most ${TARGETS.p50}× at concurrency 10 and 50 (at 1: throughput at least ${TARGETS.atOne.throughput}×); the worker's peak RSS at most ${TARGETS.peakRssOverBare}× bare's at 50; worker CPU at most ${TARGETS.workerCpu}×, every process together at most ${TARGETS.machineCpu}×; history bytes at most ${TARGETS.bytesOverBare}× bare's, events at most ${TARGETS.eventsOverBareMinimum}× the bare shape's minimum (${BARE_SHAPE_MIN_EVENTS}); at most ${TARGETS.statementsPerRun} store statements and ${TARGETS.commitsPerRun} commits per run. With faults: no duplicate refund or email, every run completed or parked with a verdict, for the refund and the checkout saga alike (the checkout's own table below).`,
  );
  out.push('');
  out.push(
    `CPU × is the project's CPU time per run over bare's: its worker alone, and every process together (worker, Temporal, proxy, the bench process with the Stripe and SMTP servers). Once the machine's ${r.machine.cpus} cores are busy, throughput × falls towards 1 / (CPU × of every process). Store statements count every SQL statement the worker sent (BEGIN and COMMIT among them), commits every transaction committed and every write outside one, as the worker's own metrics counted them (\`refunds_store_statements_total\`, \`refunds_store_commits_total\`).`,
  );
  out.push('');
  out.push(
    table(
      [
        'faults',
        'conc.',
        'throughput ×',
        'p50 ×',
        'events ×bare minimum',
        'bytes ×bare',
        'worker CPU ×',
        'all CPU ×',
        'worker peak RSS ×',
        'statements / run',
        'commits / run',
        'dup. refunds / emails',
        'completed or parked',
      ],
      r.ratios.map((x) => {
        const cell = (v: string) =>
          r.cells.find((c) => c.variant === v && c.faults === x.faults && c.concurrency === x.concurrency)!;
        const [project, bare] = [cell('project'), cell('bare')];
        const none = x.faults === 'none';
        const mark = (ok: boolean, always = false) => (none || always ? (ok ? ' ✓' : ' ✗') : '');
        const one = x.concurrency === 1;
        const tp = one ? TARGETS.atOne.throughput : TARGETS.throughput;
        const rss = project.worker.peakRssBytes / bare.worker.peakRssBytes;
        const overMin = project.history.eventsPerRun / BARE_SHAPE_MIN_EVENTS;
        const bytes = project.history.bytesPerRun / bare.history.bytesPerRun;
        const parked = Object.entries(project.other).filter(([how]) => how.startsWith('parked'));
        const settled = project.completed + parked.reduce((n, [, count]) => n + count, 0);
        return [
          x.faults,
          x.concurrency,
          f(x.throughput, 2) + mark(x.throughput >= tp),
          f(x.p50, 2) + (one ? '' : mark(x.p50 <= TARGETS.p50)),
          f(overMin, 2) + mark(overMin <= TARGETS.eventsOverBareMinimum),
          f(bytes, 2) + mark(bytes <= TARGETS.bytesOverBare),
          f(x.workerCpu, 2) + mark(x.workerCpu <= TARGETS.workerCpu),
          f(x.machineCpu, 2) + mark(x.machineCpu <= TARGETS.machineCpu),
          f(rss, 2) + (x.concurrency === 50 ? mark(rss <= TARGETS.peakRssOverBare) : ''),
          f(project.store.statementsPerRun) + mark(project.store.statementsPerRun <= TARGETS.statementsPerRun),
          f(project.store.commitsPerRun) + mark(project.store.commitsPerRun <= TARGETS.commitsPerRun),
          `${project.duplicates.refunds} / ${project.duplicates.emails}` +
            mark(project.duplicates.refunds + project.duplicates.emails === 0, true),
          `${settled}/${project.runs}` + mark(settled === project.runs, true),
        ];
      }),
    ),
  );
  out.push('');
  out.push(
    'Each ✗, its measured reason and what it would take: [README.md](README.md), "Each ✗ of the report"; what the rounds of issue 26 cut: "Fifth round", "Sixth round". The fault rows carry no target but the last two columns.',
  );
  out.push('');
  const overTable = (of: (x: BenchReport['ratios'][number]) => Over | undefined) =>
    table(
      ['faults', 'conc.', 'throughput ×', 'p50 ×', 'worker CPU ×', 'all CPU ×'],
      r.ratios.flatMap((x) => {
        const o = of(x);
        return o
          ? [[x.faults, x.concurrency, f(o.throughput, 2), f(o.p50, 2), f(o.workerCpu, 2), f(o.machineCpu, 2)]]
          : [];
      }),
    );
  out.push(...checkoutSection(r.checkouts));
  out.push('## Project against bare+platform');
  out.push('');
  out.push(
    "bare+platform is bare's shape with the platform features the project uses: payload encryption, start attributes and summary, the run's details at each step and its status upserted at the end, the worker's log line a step, the client's polling. Against it, what the money protocol alone costs; the targets stay against bare.",
  );
  out.push('');
  out.push(overTable((x) => x.againstPlatform));
  out.push('');
  if (r.baseline) {
    out.push(`## Project against ${r.baseline}`);
    out.push('');
    out.push(
      `The same cells, this build's refund workflow over ${r.baseline}'s (\`--baseline\`: its own worker and store, in the same turns). Issue 35 asks throughput within 5 % of it (× at least 0.95).`,
    );
    out.push('');
    out.push(overTable((x) => x.againstBaseline));
    out.push('');
  }
  const s = r.scale;
  out.push('## As the work grows');
  out.push('');
  if (s.replay.length) {
    out.push(
      'Replaying recorded project histories with `Worker.runReplayHistories` (the recorded runs replayed in turn):',
    );
    out.push('');
    out.push(
      table(
        ['histories', 'distinct', 'time', 'histories/s', 'failures'],
        s.replay.map((x) => [x.histories, x.distinct, ms(x.ms), f(x.perSecond), x.failures]),
      ),
    );
    out.push('');
    for (const x of s.replay.filter((r) => r.firstFailure))
      out.push(`- **Replay failed** (${x.failures} of ${x.histories}), first: ${x.firstFailure}`);
    if (s.replay.some((r) => r.firstFailure)) out.push('');
  }
  if (s.parked.length) {
    out.push(
      'Parked runs (refund unknown, waiting for a person): `npm run inspect -- --attention --json` as its own process, and one occurrence of the reconciliation sweep:',
    );
    out.push('');
    const failed = ['failed', '', '', ''];
    out.push(
      table(
        [
          'parked runs',
          'inspect: listed',
          'inspect: time',
          'inspect: ms/run',
          'inspect: peak RSS',
          'sweep: asked',
          'sweep: time',
          'sweep: ms/run',
          'worker RSS during sweep',
        ],
        s.parked.map((p) => [
          p.runs,
          ...(p.attention
            ? [p.attention.listed, ms(p.attention.ms), f(p.attention.msPerRun, 2), mb(p.attention.peakRssBytes)]
            : failed),
          ...(p.sweep
            ? [
                `${p.sweep.asked} (${p.sweep.stillUnknown} still unknown)`,
                ms(p.sweep.ms),
                f(p.sweep.msPerRun, 1),
                mb(p.sweep.workerMaxRssBytes),
              ]
            : failed),
        ]),
      ),
    );
    out.push('');
  }
  for (const e of s.errors) out.push(`- **Failed:** ${e}`);
  if (s.errors.length) out.push('');
  const w = s.longWait;
  out.push(
    `A run whose refund stayed pending at the provider for ${Math.round(w.waitedMs / 1000)} s polled ${w.polls} times: ${w.events} events (${w.bytes} bytes) against ${w.baselineEvents} for the same run without the wait, ${f(w.eventsPerPoll)} events per poll. ` +
      `The shipped policy polls ${w.shippedPolicy.polls} times over its ${w.shippedPolicy.deadlineHours} h deadline: about ${w.shippedPolicy.events} events in all, ${f((100 * w.shippedPolicy.events) / HISTORY_EVENT_LIMIT)}% of Temporal's ${HISTORY_EVENT_LIMIT}-event limit.`,
  );
  out.push('');
  const d = w.parkedDecision;
  out.push(
    `A run parked for a decision nobody made had ${d.eventsAtPark} events when it parked and ${d.eventsLater} after waiting ${Math.round(d.waitedMs / 1000)} s more` +
      (d.added.length ? ` (added: ${d.added.join(', ')}).` : ': waiting for a person adds nothing to the history.'),
  );
  out.push('');
  return out.join('\n');
}

/** The checkout saga under the refund cells' faults: how its runs ended, and its invariants where its effects land. */
function checkoutSection(cells: CheckoutCell[]): string[] {
  if (!cells.length) return [];
  const names = cells[0]!.invariants.map((i) => i.name.replace(/^checkout: /, ''));
  return [
    '## The checkout saga under the same faults',
    '',
    "Carts checked out on the project's worker (one in seven with a card that declines, one in ten started twice at once) while the same schedule of faults fires at the charges' creates and the mail server, and the worker is killed halfway; its invariants are the chaos run's, checked where the effects land.",
    '',
    table(
      ['conc.', 'checkouts', 'how they ended', ...names, 'faults fired (lost answers, 429s, resets, SMTP 451s, kills)'],
      cells.map((c) => [
        c.concurrency,
        c.checkouts,
        Object.entries(c.outcomes)
          .map(([how, n]) => `${n} ${how}`)
          .join(', '),
        ...c.invariants.map((i) => (i.holds ? `${i.checked} ✓` : `✗ ${i.violations.slice(0, 3).join('; ')}`)),
        [
          c.injected.lostAnswers,
          c.injected.rateLimits,
          c.injected.resets,
          c.injected.smtpTransient,
          c.injected.workerKills,
        ].join(' / '),
      ]),
    ),
    '',
  ];
}
