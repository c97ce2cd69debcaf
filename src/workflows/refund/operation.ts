// The operation a refund run carries out, as the run knows it: its identity (shown by the steps
// Query), and what the operation's record in the store says of its sends, over every run.
import type { BeginResult, RefundRunState, StepRecord } from '../../contract';
import { effectOfRecord, type RecordedEffect, type SendRecord } from '../../reliability/effect-of-record';
import type { RefundRequest } from '../../domain/refund-request';

export class OperationView {
  identity: RefundRunState['operation'] = null;
  /** The record as last read: at its begin, or after a send that failed (whose facts carry it). */
  private record: SendRecord | null = null;
  private dedupeWindowMs: number | null = null;

  /** The operation as loading the order returned it. */
  begin(begin: BeginResult, request: RefundRequest, policyVersion: string): void {
    const op = begin.operation;
    this.note(op);
    this.dedupeWindowMs = begin.settings.provider.dedupeWindowMs;
    this.identity = {
      operationId: op.operationId,
      operationVersion: op.operationVersion,
      scope: op.scope,
      requestHash: op.requestHash,
      recordedByThisRun: begin.created,
      dedupeWindowExpiresAt: op.firstSentAt
        ? new Date(Date.parse(op.firstSentAt) + this.dedupeWindowMs).toISOString()
        : null,
      expectedReceipt: `one Stripe refund of ${request.amount} ${request.currency} on ${begin.order.paymentIntentId} with metadata.operation_id = ${op.operationId}`,
      policyVersion,
    };
  }

  note({ status, requestsSent, provenAbsentThrough, refund = null }: SendRecord): void {
    this.record = { status, requestsSent, provenAbsentThrough, refund };
  }

  /** What the operation's record says of the refund, over every send of every run; null before it was read. */
  recordedEffect(): RecordedEffect | null {
    return this.record && effectOfRecord(this.record);
  }

  /** Stamps the key's dedupe window from the start of the first attempt that sent a request: never overstated. */
  noteFirstSend(create: StepRecord): void {
    if (!this.identity || this.identity.dedupeWindowExpiresAt !== null || this.dedupeWindowMs === null) return;
    const first = create.ledger.find((a) => a.transportRequests > 0);
    if (first)
      this.identity.dedupeWindowExpiresAt = new Date(Date.parse(first.startedAt) + this.dedupeWindowMs).toISOString();
  }
}
