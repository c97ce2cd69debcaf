// The schedules, as code: each a calendar in an IANA time zone, the workflow it starts, and
// explicit policies for overlap, catch-up and failure. A JSON file (SCHEDULES_FILE) replaces the
// shipped definitions; both are validated here, and a bad one is refused naming each problem.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { z } from 'zod';
import { reading, zodProblems } from '../domain/zod-problems';

const SCHEDULED_WORKFLOWS = ['batchRefundsWorkflow', 'digestWorkflow', 'sweepWorkflow'] as const;

const OVERLAP = ['SKIP', 'BUFFER_ONE', 'BUFFER_ALL', 'ALLOW_ALL', 'CANCEL_OTHER', 'TERMINATE_OTHER'] as const;
/** Cancelling or terminating a running occurrence can cut it between a provider's answer and our record of it. */
const WRONG_FOR_MONEY = new Set(['CANCEL_OTHER', 'TERMINATE_OTHER']);

const field = (max: number) =>
  z.union([z.literal('*'), z.number().int().min(0).max(max), z.array(z.number().int().min(0).max(max)).min(1)]);
const DAYS = ['SUNDAY', 'MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY'] as const;

const timeZone = z.string().refine((tz) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return tz.includes('/') || tz === 'UTC';
  } catch {
    return false;
  }
}, 'must be an IANA time zone, e.g. America/New_York or UTC');

const scheduleDefinitionSchema = z
  .object({
    id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be lowercase letters, digits and "-"'),
    /** Raise it with every change; `apply` records it on the schedule. */
    version: z.number().int().positive(),
    description: z.string().min(1).max(300),
    workflow: z.enum(SCHEDULED_WORKFLOWS),
    args: z.record(z.string(), z.unknown()).default({}),
    calendar: z
      .object({
        minute: field(59).default(0),
        hour: field(23).default('*'),
        dayOfMonth: field(31).optional(),
        dayOfWeek: z.array(z.enum(DAYS)).min(1).optional(),
      })
      .strict(),
    timeZone,
    overlap: z.enum(OVERLAP).default('SKIP'),
    /** How late a missed occurrence may still run, once Temporal (or the schedule) is back: older ones are dropped. */
    catchupWindowMs: z.number().int().min(10_000),
    pauseOnFailure: z.boolean().default(true),
    /** Optional bounds, ISO instants. */
    startAt: z.string().datetime({ offset: true }).optional(),
    endAt: z.string().datetime({ offset: true }).optional(),
    taskQueue: z.string().min(1).default('refunds'),
  })
  .strict()
  .superRefine((d, ctx) => {
    if (WRONG_FOR_MONEY.has(d.overlap))
      ctx.addIssue({
        code: 'custom',
        path: ['overlap'],
        message: `${d.overlap} stops a running occurrence, which may be between a provider's answer and our record of it; use SKIP, BUFFER_ONE or ALLOW_ALL`,
      });
  });

export type ScheduleDefinition = z.output<typeof scheduleDefinitionSchema>;
export type ScheduleDefinitionInput = z.input<typeof scheduleDefinitionSchema>;

/** The shipped schedules, in `timeZone` (overlap SKIP and pausing on failure are the schema's defaults). */
function defaultDefinitions(timeZone: string): ScheduleDefinitionInput[] {
  return [
    {
      id: 'refund-batch',
      version: 1,
      description: 'starts queued refund requests, up to the limit per occurrence',
      workflow: 'batchRefundsWorkflow',
      args: { limit: 100 },
      calendar: { minute: [0, 15, 30, 45], hour: '*' },
      timeZone,
      catchupWindowMs: 3600_000,
    },
    {
      id: 'refund-sweep',
      version: 1,
      description: 'reconciles parked runs whose refund is unknown, within its budget',
      workflow: 'sweepWorkflow',
      args: { maxRuns: 200 },
      calendar: { minute: [5, 35], hour: '*' },
      timeZone,
      catchupWindowMs: 1800_000,
    },
    {
      id: 'refund-digest',
      version: 1,
      description: 'emails the operators what still waits for a person',
      workflow: 'digestWorkflow',
      args: { max: 100 },
      calendar: { minute: 0, hour: 8 },
      timeZone,
      catchupWindowMs: 12 * 3600_000,
      pauseOnFailure: false,
    },
  ];
}

/** Validates definitions, naming every problem; ids must be unique. */
export function parseDefinitions(raw: unknown, source: string): ScheduleDefinition[] {
  const parsed = z.array(scheduleDefinitionSchema).min(1).safeParse(raw);
  if (!parsed.success) throw new Error(`${source}: ${zodProblems(parsed.error, '(top)')}`);
  const ids = parsed.data.map((d) => d.id);
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice) throw new Error(`${source}: schedule id ${twice} appears twice`);
  return parsed.data;
}

export function loadDefinitions(opts: { file?: string; timeZone: string; taskQueue: string }): ScheduleDefinition[] {
  const { file } = opts;
  const raw: unknown = file
    ? reading(`SCHEDULES_FILE ${file}: `, () => JSON.parse(fs.readFileSync(file, 'utf8')))
    : defaultDefinitions(opts.timeZone);
  // Entries that name no task queue go to the one the workers poll (TASK_QUEUE).
  const withQueue = Array.isArray(raw)
    ? raw.map((d: unknown) =>
        d && typeof d === 'object' && !('taskQueue' in d) ? { ...d, taskQueue: opts.taskQueue } : d,
      )
    : raw;
  return parseDefinitions(withQueue, opts.file ? `SCHEDULES_FILE ${opts.file}` : 'the shipped schedules');
}

/** `v<version> <hash>`: what `apply` records on the schedule, to tell an up-to-date schedule from a stale one. */
export function fingerprint(d: ScheduleDefinition): string {
  const hash = createHash('sha256').update(JSON.stringify(d)).digest('hex').slice(0, 12);
  return `v${d.version} ${hash}`;
}
