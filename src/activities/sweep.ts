// Reads Temporal's visibility for scheduled work: the runs that wait for a person.
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { ATTENTION_QUERY, runsNeedingAttention, type AttentionRun } from '../inspect/attention';
import { decisionUpdate, stepsQuery, SWEEPER, sweepUpdateId } from '../contract';

/** Parked runs whose send is unknown (a refund, a checkout's charge): what the sweep asks to reconcile. */
export const UNKNOWN_QUERY = `${ATTENTION_QUERY} AND RefundEffect = 'unknown' AND RefundStep IN ('create_refund', 'charge_card') AND RefundStatus = 'needs_attention' AND ExecutionStatus = 'Running'`;
/** How many matching runs one occurrence looks at, at most, per run it may ask: refusals (asked lately) are skipped quickly. */
const SCAN_FACTOR = 20;

export interface SweepReport {
  /** Runs asked to reconcile, and what became of each within the wait. */
  reconciled: string[];
  stillUnknown: string[];
  pending: string[];
  /** Runs that refused the request (asked by a recent sweep, or their state moved on), with why; they do not count against maxRuns. */
  refused: { workflowId: string; reason: string }[];
  /** Runs that closed meanwhile: ended without a settled refund (cancelled, terminated), or gone. */
  closed: string[];
  /** More runs matched than this occurrence may take; the next occurrence goes on. */
  more: boolean;
}

export function createSweepActivities(deps: { temporal?: Client }) {
  const client = () => {
    if (deps.temporal) return deps.temporal;
    throw ApplicationFailure.nonRetryable('this worker has no Temporal client for visibility queries', 'CONFIGURATION');
  };
  return {
    /** How many runs need a person, and the first `max` of them in the order visibility returns them (newest first). */
    async listAttention(input: { max: number }): Promise<{ total: number; runs: AttentionRun[] }> {
      const { count } = await client().workflow.count(ATTENTION_QUERY);
      const runs: AttentionRun[] = [];
      if (input.max > 0) {
        for await (const run of runsNeedingAttention(client(), Math.min(input.max, 500))) {
          runs.push(run);
          if (runs.length >= input.max) break;
        }
      }
      return { total: Math.max(count, runs.length), runs };
    },

    /**
     * Asks up to `maxRuns` parked runs whose send is unknown to reconcile (nothing is sent), one Update each under the
     * occurrence's id so a re-run asks no run twice, then waits up to `waitMs` for each to settle or park again.
     */
    async sweepUnknown(input: { occurrenceId: string; maxRuns: number; waitMs: number }): Promise<SweepReport> {
      const c = client();
      const report: SweepReport = {
        reconciled: [],
        stillUnknown: [],
        pending: [],
        refused: [],
        closed: [],
        more: false,
      };
      let scanned = 0;
      const asked: { workflowId: string; at: string }[] = [];
      for await (const w of c.workflow.list({ query: UNKNOWN_QUERY, pageSize: Math.min(input.maxRuns + 1, 500) })) {
        if (asked.length >= input.maxRuns || ++scanned > input.maxRuns * SCAN_FACTOR) {
          report.more = true;
          break;
        }
        Context.current().heartbeat(w.workflowId);
        try {
          const record = await c.workflow.getHandle(w.workflowId).executeUpdate(decisionUpdate, {
            args: [{ decision: 'reconcile', by: SWEEPER, reason: `scheduled sweep ${input.occurrenceId}` }],
            updateId: sweepUpdateId(input.occurrenceId),
          });
          asked.push({ workflowId: w.workflowId, at: record.at });
        } catch (err) {
          if (err instanceof WorkflowUpdateFailedError)
            report.refused.push({ workflowId: w.workflowId, reason: err.cause?.message ?? err.message });
          // Visibility lags: a run listed may have closed since.
          else if (err instanceof WorkflowNotFoundError || /already completed|not found/i.test((err as Error)?.message))
            report.closed.push(w.workflowId);
          else throw err;
        }
      }
      const until = Date.now() + input.waitMs;
      /** The report's list a run asked at `at` belongs in now; none while it may still settle within the wait. */
      const listFor = async (workflowId: string, at: string) => {
        const handle = c.workflow.getHandle(workflowId);
        const { status } = await handle.describe();
        // Completed is the run finishing after its effect was found; anything else ended without saying.
        if (status.name !== 'RUNNING') return status.name === 'COMPLETED' ? report.reconciled : report.closed;
        const state = await handle.query(stepsQuery);
        if (state.effect.status !== 'unknown') return report.reconciled;
        // Parked again after the request: the lookups ended without an answer.
        if (state.parked && Date.parse(state.parked.since) >= Date.parse(at)) return report.stillUnknown;
        return Date.now() >= until ? report.pending : undefined;
      };
      for (const { workflowId, at } of asked) {
        let list: string[] | undefined;
        while (!(list = await listFor(workflowId, at))) {
          Context.current().heartbeat(workflowId);
          await new Promise((r) => setTimeout(r, 250));
        }
        list.push(workflowId);
      }
      return report;
    },
  };
}
