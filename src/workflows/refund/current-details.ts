// The run's current details in the Web UI (markdown, served by the SDK's metadata Query), set at each move: the
// verdict, next action and decide command as `inspect` draws them from the same state. Not a command: no patch needed.
import type { Standing } from '../../saga/workflow/visibility';
import { decideCommand, decisionAddress, type RefundRunState } from '../../contract';
import { maskEmails } from '../../reliability/redaction';
import { verdict } from '../../reliability/verdict';

export function currentDetails(state: RefundRunState, standing: Standing): string {
  const { outcome, workflowId } = state;
  const judged = verdict({
    execution: standing,
    state,
    result: standing === 'COMPLETED' ? { status: state.status, ...(outcome && { reason: outcome.reason }) } : null,
    failure: standing === 'CANCELED' ? (outcome?.reason ?? 'cancelled') : null,
    inferences: [],
    parkedVerdict: null,
    orderId: state.request.orderId,
    version: state.request.operationVersion,
  });
  const step = outcome?.failedStep ? ` at ${outcome.failedStep}` : '';
  const lines = [
    `**${standing === 'CANCELED' ? 'cancelled' : state.status}**${outcome ? `${step}: ${outcome.reason}` : ''}`,
    `**Verdict:** ${judged.verdict}`,
    `**Next action:** ${judged.nextAction}`,
  ];
  if (judged.decision) {
    const approval = judged.approvedBy.length ? `; approved by ${judged.approvedBy.join(', ')}` : '';
    lines.push(`**Who may decide:** ${judged.decidedBy.join(', ') || 'nobody the policy names'}${approval}`);
    const address = state.parked ? decisionAddress(state) : null;
    if (standing === 'RUNNING') lines.push(`**Decide:** \`${decideCommand(workflowId, judged.decision, address)}\``);
  }
  const operation = state.operation?.operationId;
  lines.push(
    `**Refund:** ${state.effect.status}${state.effect.refundId ? ` (${state.effect.refundId})` : ''}${operation ? `, operation ${operation}` : ''}`,
    `**Evidence:** \`npm run inspect -- ${workflowId}\``,
  );
  return maskEmails(lines.join('\n\n'));
}
