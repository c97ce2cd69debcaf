// The docs' table of a saga's steps, rendered from their definitions so that the two never drift apart.
import type { StepCall } from '../../src/saga/step';

/** What the table reads of a step's definition. */
type TabledStep = Pick<StepCall<string>, 'activity' | 'effect' | 'runs' | 'boundary' | 'carriedBy' | 'firstReadIn'> & {
  name: string;
  action: string;
  key?: unknown;
  undo: { kind: string; activity?: string };
  pointOfNoReturn: boolean;
  dependsOn: readonly string[];
};

/** Which earlier step's task may carry it (issue 36 carries it; until then each step is a task of its own). */
const carriage = (s: TabledStep) =>
  (s.carriedBy ? `; may ride on \`${s.carriedBy}\`'s receipt` : '') +
  (s.firstReadIn ? `; first read may run in \`${s.firstReadIn}\`` : '');

export function stepTable(steps: Readonly<Record<string, TabledStep>>): string {
  const code = (s: string) => `\`${s}\``;
  const rows = Object.values(steps).map((s) =>
    [
      code(s.name),
      s.action,
      `${code(s.activity)} (${s.effect}, ${s.runs === 'local' ? 'local' : `${s.runs} pool`}${carriage(s)})`,
      s.boundary,
      s.key ? code(`<operation>:${s.name}`) : 'none',
      s.undo.kind === 'compensation'
        ? `${code(s.undo.activity!)} under ${code(`<operation>:${s.name}:compensate`)}`
        : s.undo.kind.replace('_', ' '),
      s.pointOfNoReturn ? '**yes**' : 'no',
      s.dependsOn.length ? s.dependsOn.map(code).join(', ') : 'none',
    ].join(' | '),
  );
  const head = [
    'step',
    'does',
    'activity (effect, where)',
    'boundary',
    'key',
    'undo',
    'point of no return',
    'depends on',
  ];
  return [head.join(' | '), head.map(() => '---').join(' | '), ...rows].map((r) => `| ${r} |`).join('\n');
}
