// What the Web UI shows of a refund run before it runs a step: its static summary (one line: the
// order, the amount, the operation) and details, set by whoever starts it. User metadata is a payload,
// encrypted like the others; the Web UI reads it through the codec server. No customer data in it.
import type { RefundRequest } from '../domain/refund-request';
import { maskEmails } from '../reliability/redaction';

export function runSummary(request: RefundRequest): string {
  return `Refund ${request.amount} ${request.currency} on order ${request.orderId}, operation v${request.operationVersion}`;
}

export function runDetails(request: RefundRequest, workflowId: string): string {
  return [
    `Order ${request.orderId}: refund ${request.amount} ${request.currency} (minor units), reason ${request.reason}`,
    `Operation version ${request.operationVersion}, requested by ${maskEmails(request.requestedBy)}`,
    `What it did and what it needs: \`npm run inspect -- ${workflowId}\``,
  ].join('\n\n');
}
