// Temporal Schedules made from our definitions: `apply` creates each or brings it to its definition
// (an up-to-date one is left alone); `temporal schedule …` and the Web UI see and steer the same ones.
import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  type Client,
  type ScheduleDescription,
  type ScheduleOptions,
  type ScheduleOverlapPolicy,
} from '@temporalio/client';
import { fingerprint, type ScheduleDefinition } from './definitions';

type ApplyOutcome = 'created' | 'updated' | 'unchanged';

function optionsFor(d: ScheduleDefinition): ScheduleOptions {
  return {
    scheduleId: d.id,
    spec: {
      // A field the definition leaves out is the SDK's default, as an undefined one is.
      calendars: [{ ...d.calendar, comment: d.description }],
      timezone: d.timeZone,
      ...(d.startAt && { startAt: new Date(d.startAt) }),
      ...(d.endAt && { endAt: new Date(d.endAt) }),
    },
    action: {
      type: 'startWorkflow',
      workflowType: d.workflow,
      args: [d.args],
      taskQueue: d.taskQueue,
      // Temporal appends each occurrence's scheduled time to this id.
      workflowId: d.id,
      memo: { scheduleDefinition: fingerprint(d) },
    },
    policies: { overlap: d.overlap, catchupWindow: d.catchupWindowMs, pauseOnFailure: d.pauseOnFailure },
    state: { note: `durable-refunds ${d.id} ${fingerprint(d)}` },
  };
}

/** Whether the schedule was applied from this definition (its fingerprint) and still matches it (someone may change it by hand). */
function upToDate(described: ScheduleDescription, d: ScheduleDefinition): boolean {
  const { action } = described;
  return (
    action.memo?.scheduleDefinition === fingerprint(d) &&
    action.workflowType === d.workflow &&
    JSON.stringify(action.args?.[0] ?? {}) === JSON.stringify(d.args) &&
    action.taskQueue === d.taskQueue &&
    described.policies.overlap === d.overlap &&
    described.policies.catchupWindow === d.catchupWindowMs &&
    described.policies.pauseOnFailure === d.pauseOnFailure &&
    described.spec.timezone === d.timeZone
  );
}

export async function describeSchedule(client: Client, id: string): Promise<ScheduleDescription | undefined> {
  try {
    return await client.schedule.getHandle(id).describe();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return undefined;
    throw err;
  }
}

/** Creates the schedule, or updates it to the definition; a paused schedule stays paused. */
export async function applySchedule(client: Client, d: ScheduleDefinition): Promise<ApplyOutcome> {
  const options = optionsFor(d);
  const described = await describeSchedule(client, d.id);
  if (!described) {
    try {
      await client.schedule.create(options);
      return 'created';
    } catch (err) {
      // Another apply created it a moment ago: bring that one to the definition instead.
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      return applySchedule(client, d);
    }
  }
  if (upToDate(described, d)) return 'unchanged';
  await client.schedule.getHandle(d.id).update((previous) => ({
    spec: options.spec,
    action: options.action,
    policies: options.policies,
    // A paused schedule stays paused, with the note that says why.
    state: previous.state.paused
      ? { paused: true, note: previous.state.note }
      : { paused: false, note: options.state?.note },
  }));
  return 'updated';
}

/**
 * Takes one action now under the schedule's own overlap policy, unless told otherwise (the SDK's
 * trigger would otherwise default to ALLOW_ALL, and start beside a running occurrence).
 */
export async function triggerSchedule(client: Client, id: string, overlap?: ScheduleOverlapPolicy) {
  const handle = client.schedule.getHandle(id);
  const policy = overlap ?? (await handle.describe()).policies.overlap;
  await handle.trigger(policy);
  return policy;
}

/** A time as people in the schedule's zone read it, with the instant. */
function inZone(at: Date, timeZone: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
      timeZoneName: 'short',
    })
      .formatToParts(at)
      .map((p) => [p.type, p.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute} ${parts.timeZoneName} (${at.toISOString()})`;
}

type Range = { start: number | string; end: number | string; step?: number };
const FULL: Record<string, string> = {
  second: '0',
  dayOfMonth: '1-31',
  month: 'JANUARY-DECEMBER',
  dayOfWeek: 'SUNDAY-SATURDAY',
};

/** A described calendar as people write it: `minute 0,30 hour 2`, leaving out what every day has. */
function calendarText(calendars: unknown): string {
  return ((calendars ?? []) as Record<string, Range[] | string | undefined>[])
    .map((cal) =>
      Object.entries(cal)
        .filter(([, v]) => Array.isArray(v) && v.length > 0)
        .map(([field, v]) => [
          field,
          (v as Range[])
            .map((r) =>
              r.start === r.end ? `${r.start}` : `${r.start}-${r.end}${(r.step ?? 1) > 1 ? `/${r.step}` : ''}`,
            )
            .join(','),
        ])
        .filter(([field, text]) => FULL[field!] !== text)
        .map(([field, text]) => `${field} ${text}`)
        .join(' '),
    )
    .join('; ');
}

/** A described schedule as the CLI shows it: its next and recent times in its own time zone. */
export function viewOf(id: string, described: ScheduleDescription) {
  const tz = described.spec.timezone ?? 'UTC';
  const { action } = described;
  return {
    id,
    definition: typeof action.memo?.scheduleDefinition === 'string' ? action.memo.scheduleDefinition : null,
    workflow: action.workflowType ?? null,
    args: action.args?.[0] ?? null,
    timeZone: tz,
    calendar: calendarText(described.spec.calendars),
    overlap: described.policies.overlap,
    catchupWindowMs: described.policies.catchupWindow,
    pauseOnFailure: described.policies.pauseOnFailure,
    paused: described.state.paused,
    note: described.state.note ?? null,
    next: described.info.nextActionTimes.map((t) => inZone(t, tz)),
    recent: described.info.recentActions.map((a) => ({
      scheduledAt: inZone(a.scheduledAt, tz),
      takenAt: a.takenAt.toISOString(),
      workflowId: a.action?.workflow?.workflowId ?? null,
    })),
    running: described.info.runningActions.map((a) => a.workflow.workflowId),
  };
}

export type ScheduleView = ReturnType<typeof viewOf>;
