// `npm run inspect -- <workflow id>`: what a refund run has done to the world, what is inferred from
// it and how sure that is, the verdict, and the single smallest next action. `--attention` lists
// every run that needs a person, read page by page from Temporal's visibility.
import type { Client } from '@temporalio/client';
import { Command } from 'commander';
import { createStripeClient } from '../activities/stripe-client';
import { loadConfig } from '../config';
import { runsNeedingAttention, ATTENTION_QUERY } from '../inspect/attention';
import { inspectRun, type Inspection } from '../inspect/inspection';
import { decideCommand, type StepRecord } from '../contract';
import { exitOnError, noSuchRun, wholeNumber, withClient, withStore } from './common';

const program = new Command('inspect')
  .description(
    'Inspect a refund run (step table, observed facts, inferences, verdict, next action), or list the runs that need a person.',
  )
  .argument('[workflow-id]', 'the run to inspect, e.g. refund-ord_1-v1')
  .option('--attention', `list every run that needs a person (${ATTENTION_QUERY})`)
  .option('--page-size <n>', 'runs per visibility page, with --attention', wholeNumber('--page-size', 1), 500)
  .option('--json', 'print JSON (one object; with --attention, one object per line)')
  .showHelpAfterError();

async function main() {
  program.parse();
  const [workflowId] = program.args as [string | undefined];
  const opts = program.opts<{ attention?: boolean; pageSize: number; json?: boolean }>();
  if (Boolean(opts.attention) === (workflowId !== undefined))
    program.error('inspect: give a workflow id, or --attention', { exitCode: 2 });
  const config = loadConfig();
  await withClient(config, async (client) => {
    if (opts.attention) return await listAttention(client, opts.pageSize, opts.json ?? false);
    await withStore(config, async (store) => {
      const sources = {
        store,
        stripe: createStripeClient(config.stripe),
        ledgerUrl: config.stripe.local ? config.stripe.apiBase : undefined,
        // The local SMTP server's mailbox is readable; a mail provider's is not, and inspect says so.
        mailboxUrl: /^smtps?:\/\/(127\.0\.0\.1|localhost)[:/]/.test(config.mail.smtpUrl)
          ? config.mail.mailboxUrl
          : undefined,
      };
      const inspection = await inspectRun(client, sources, config.scope, workflowId!);
      // Through the codec endpoint: a decision sent in plaintext is refused (PAYLOAD_PLAINTEXT).
      const codec = config.encryption.enabled ? ` --codec-endpoint ${config.codec.endpoint}` : '';
      console.log(opts.json ? JSON.stringify(inspection, null, 2) : render(inspection, codec));
    });
  });
}

async function listAttention(client: Client, pageSize: number, json: boolean): Promise<void> {
  const widths = [34, 10, 18, 16, 9];
  const line = (cells: string[]) => cells.map((c, i) => (i < widths.length ? c.padEnd(widths[i]!) : c)).join('  ');
  let count = 0;
  for await (const run of runsNeedingAttention(client, pageSize)) {
    if (!json && count === 0) console.log(line(['workflow id', 'execution', 'status', 'step', 'effect', 'verdict']));
    const rest = [run.status, run.step, run.effect, run.verdict].map((cell) => cell ?? '-');
    console.log(json ? JSON.stringify(run) : line([run.workflowId, run.execution, ...rest]));
    count += 1;
  }
  if (!json)
    console.log(
      count === 0
        ? 'no run needs a person'
        : `${count} run(s) need a person; \`npm run inspect -- <workflow id>\` shows one`,
    );
}

function render(i: Inspection, codecFlag: string): string {
  const out: string[] = [];
  out.push(`${i.workflowId}  ${i.execution}${i.refundStatus ? ` · ${i.refundStatus}` : ''}`);
  out.push(
    `  order ${i.orderId ?? '-'} · operation ${i.operationId ?? '-'} · started ${i.startedAt}${i.closedAt ? ` · closed ${i.closedAt}` : ''}`,
  );
  if (i.outcome)
    out.push(`  ${i.outcome.status}${i.outcome.failedStep ? ` at ${i.outcome.failedStep}` : ''}: ${i.outcome.reason}`);

  const steps = i.steps?.map((s) => [s.name, s.status, `${s.attempts}`, `${s.transportRequests}`, stepDetail(s)]);
  const stepTable = steps ? columns(['step', 'status', 'attempts', 'requests', 'detail'], steps) : null;
  const facts = i.facts.map((f) => [f.id, f.says]);
  out.push('', 'Steps', stepTable ?? `  (${i.stateUnavailable})`);
  out.push('', 'Observed facts', columns(['from', 'says'], facts));

  out.push('', 'Inferences');
  if (i.inferences.length === 0) out.push('  (none: there is no evidence to infer from)');
  for (const inf of i.inferences) {
    out.push(`  ${inf.status.padEnd(15)}  ${inf.claim}${inf.basis.length ? `  [${inf.basis.join(', ')}]` : ''}`);
    if (inf.check) out.push(`  ${''.padEnd(15)}  to confirm: ${inf.check}`);
  }
  if (i.unavailable.length) out.push('', 'Not read', ...i.unavailable.map((u) => `  ${u}`));

  if (i.decisions.length) {
    out.push('', 'Decisions');
    for (const d of i.decisions) {
      const answers = d.answers ? ` (answers #${d.answers})` : '';
      out.push(
        `  #${d.seq} ${d.decision}${d.step ? ` ${d.step}` : ''} by ${d.by} at ${d.at}${answers}: ${d.outcome}${d.expiresAt && d.outcome === 'awaiting_approval' ? ` until ${d.expiresAt}` : ''}; "${d.reason}"`,
      );
    }
  }

  out.push('', `Verdict      ${i.verdict}`, `Next action  ${i.nextAction}`);
  // What decide --answers takes: a decision for this parking is refused once the run has moved on.
  if (i.address) out.push(`Address      ${i.address}`);
  if (i.escalation && i.decision) out.push(`Escalation   ${i.escalation}`);
  if (i.decidedBy.length)
    out.push(
      `Who          ${i.decidedBy.join(', ')}${i.approvedBy.length ? `; approved by ${i.approvedBy.join(', ')}` : ''}`,
    );
  if (i.execution === 'RUNNING' && i.decision) {
    const decision = i.decision.split(':')[0]!;
    const answers = i.address ? ` --answers ${i.address}` : '';
    out.push(
      `Decide       ${decideCommand(i.workflowId, i.decision, i.address)}`,
      // The temporal CLI sends what decide --print signed: an unsigned decision is refused (docs/production.md).
      `  or         temporal workflow update execute --workflow-id ${i.workflowId} --name decide --input "$(npm run -s decide -- ${i.workflowId} ${decision}${answers} --by <name> --reason '<why>' --print)"${codecFlag}`,
    );
  }
  return out.join('\n');
}

/** Plain aligned columns for a terminal: a header, then rows, each cell padded to its column. */
function columns(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    '  ' + cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

function stepDetail(s: StepRecord): string {
  const parts: string[] = [];
  const output = s.output as Record<string, unknown> | undefined;
  if (s.status === 'completed' && output) {
    const ids = ['refundId', 'messageId', 'status', 'verdict']
      .filter((k) => typeof output[k] === 'string')
      .map((k) => `${k} ${String(output[k])}`);
    parts.push(ids.join(', '));
  }
  if (s.error) parts.push(`${s.error.code} (${s.error.certainty}): ${s.error.message}`);
  if (s.note) parts.push(s.note);
  const c = s.compensation;
  if (c)
    parts.push(
      c.kind === 'compensation'
        ? `compensation ${c.status} under ${c.key}${c.error ? ` (${c.error.code})` : ''}`
        : `forward repair: ${c.note ?? c.status}`,
    );
  return parts.filter(Boolean).join('; ') || (s.idempotencyKey ? `key ${s.idempotencyKey}` : '');
}

exitOnError('inspect', main(), (err) => noSuchRun(err, program.args[0], 'need a person'));
