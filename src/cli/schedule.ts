// `npm run schedule -- apply|describe|list|pause|unpause|trigger|backfill|delete`: the schedules
// in src/schedules/definitions.ts (or SCHEDULES_FILE) on Temporal. The same schedules answer to
// `temporal schedule …` and the Web UI's Schedules page.
import type { ScheduleOverlapPolicy } from '@temporalio/client';
import { Command, InvalidArgumentError, Option } from 'commander';
import { loadConfig } from '../config';
import { loadDefinitions, type ScheduleDefinition } from '../schedules/definitions';
import { applySchedule, describeSchedule, triggerSchedule, viewOf, type ScheduleView } from '../schedules/schedules';
import { exitOnError, withClient } from './common';

const config = loadConfig();
const definitions = (): ScheduleDefinition[] => loadDefinitions({ ...config.schedules, taskQueue: config.taskQueue });

/** A schedule id this project defines; anything else is refused, so a typo never touches another team's schedule. */
function known(id: string): string {
  const ids = definitions().map((d) => d.id);
  if (!ids.includes(id)) throw new InvalidArgumentError(`no schedule ${id} is defined here (${ids.join(', ')})`);
  return id;
}

const instant = (name: string) => (value: string) => {
  const t = new Date(value);
  if (Number.isNaN(t.getTime()) || !/\d{4}-\d{2}-\d{2}T/.test(value))
    throw new InvalidArgumentError(`${name} must be an ISO instant such as 2026-12-01T08:00:00Z, got "${value}"`);
  return t;
};

const overlapOption = (what: string, fallback?: string) =>
  new Option(
    '--overlap <policy>',
    `overlap policy for this ${what}${fallback ? ` (default ${fallback})` : " (default: the schedule's)"}`,
  ).choices(['SKIP', 'BUFFER_ONE', 'BUFFER_ALL', 'ALLOW_ALL']);

function render(v: ScheduleView): string {
  return [
    `${v.id}  ${v.paused ? 'PAUSED' : 'active'}  ${v.workflow ?? '?'} ${JSON.stringify(v.args)}`,
    `  definition      ${v.definition ?? '(not applied from code)'}`,
    `  calendar        ${v.calendar} in ${v.timeZone}`,
    `  overlap         ${v.overlap}; catch-up window ${Math.round(v.catchupWindowMs / 60_000)} min; pause on failure ${v.pauseOnFailure ? 'yes' : 'no'}`,
    ...(v.note ? [`  note            ${v.note}`] : []),
    `  next actions    ${v.next.length ? v.next.join('\n                  ') : 'none'}`,
    `  recent          ${v.recent.length ? v.recent.map((r) => `${r.scheduledAt} → ${r.workflowId ?? '?'}`).join('\n                  ') : 'none'}`,
    ...(v.running.length ? [`  running         ${v.running.join(', ')}`] : []),
  ].join('\n');
}

const program = new Command('schedule')
  .description('Temporal Schedules for the batch, the sweep and the digest, from the definitions in code.')
  .showHelpAfterError();

/** A subcommand on one schedule defined here. */
const onSchedule = (verb: string) => program.command(verb).argument('<schedule-id>', 'a schedule defined here', known);

program
  .command('apply')
  .description('create each schedule, or update it to its definition (idempotent)')
  .action(() =>
    withClient(config, async (client) => {
      for (const d of definitions())
        console.log(
          `${d.id}: ${await applySchedule(client, d)} (v${d.version}, ${d.workflow}, ${d.timeZone}, overlap ${d.overlap})`,
        );
    }),
  );

onSchedule('describe')
  .option('--json', 'print JSON')
  .description('the schedule, its policies and its next action times in its own time zone')
  .action((id: string, opts: { json?: boolean }) =>
    withClient(config, async (client) => {
      const described = await describeSchedule(client, id);
      if (!described)
        throw new Error(`schedule ${id} does not exist on Temporal yet; \`npm run schedule -- apply\` creates it`);
      const view = viewOf(id, described);
      console.log(opts.json ? JSON.stringify(view, null, 2) : render(view));
    }),
  );

program
  .command('list')
  .option('--json', 'print JSON')
  .description('every schedule defined here, and whether it exists on Temporal')
  .action((opts: { json?: boolean }) =>
    withClient(config, async (client) => {
      const rows = [];
      for (const d of definitions()) {
        const described = await describeSchedule(client, d.id);
        rows.push(described ? viewOf(d.id, described) : { id: d.id, missing: true });
      }
      if (opts.json) return console.log(JSON.stringify(rows, null, 2));
      for (const r of rows) {
        if ('missing' in r) console.log(`${r.id.padEnd(16)} not on Temporal (npm run schedule -- apply)`);
        else
          console.log(
            `${r.id.padEnd(16)} ${(r.paused ? 'PAUSED' : 'active').padEnd(7)} ${r.definition ?? '?'}  next ${r.next[0] ?? 'none'}`,
          );
      }
    }),
  );

for (const verb of ['pause', 'unpause'] as const) {
  onSchedule(verb)
    .option('--note <why>', 'why, kept on the schedule')
    .description(verb === 'pause' ? 'stop taking actions until unpaused' : 'take actions again')
    .action((id: string, opts: { note?: string }) =>
      withClient(config, async (client) => {
        const handle = client.schedule.getHandle(id);
        await (verb === 'pause' ? handle.pause(opts.note) : handle.unpause(opts.note));
        console.log(`${id}: ${verb}d`);
      }),
    );
}

onSchedule('trigger')
  .addOption(overlapOption('trigger'))
  .description('take one action now')
  .action((id: string, opts: { overlap?: ScheduleOverlapPolicy }) =>
    withClient(config, async (client) => {
      const policy = await triggerSchedule(client, id, opts.overlap);
      console.log(`${id}: triggered (overlap ${policy})`);
    }),
  );

onSchedule('backfill')
  .requiredOption('--from <instant>', 'start of the window (ISO instant, inclusive)', instant('--from'))
  .requiredOption('--to <instant>', 'end of the window (ISO instant)', instant('--to'))
  .addOption(overlapOption('backfill', 'BUFFER_ALL: every occurrence in the window, one after another'))
  .description('take the actions the calendar had in a past window, each an occurrence with its own id')
  .action((id: string, opts: { from: Date; to: Date; overlap?: ScheduleOverlapPolicy }) =>
    withClient(config, async (client) => {
      if (opts.to <= opts.from) throw new InvalidArgumentError('--to must be after --from');
      await client.schedule
        .getHandle(id)
        .backfill({ start: opts.from, end: opts.to, overlap: opts.overlap ?? 'BUFFER_ALL' });
      console.log(`${id}: backfilling ${opts.from.toISOString()} to ${opts.to.toISOString()}`);
    }),
  );

onSchedule('delete')
  .description('delete the schedule (occurrences already started run on)')
  .action((id: string) =>
    withClient(config, async (client) => {
      await client.schedule.getHandle(id).delete();
      console.log(`${id}: deleted`);
    }),
  );

exitOnError('schedule', program.parseAsync(), (err) => (err instanceof InvalidArgumentError ? 2 : undefined));
